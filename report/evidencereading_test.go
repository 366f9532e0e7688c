package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// readingConstants are decimal numbers in the hand-written readings of
// evidence/README.md that are not measurements: section heading prefix
// and number, with where the number comes from.
var readingConstants = map[[2]string]string{
	{"## E7:", "1.5"}: "RFC 7252's ACK_RANDOM_FACTOR",
}

// TestEvidenceReadingsQuoteTheirCampaigns checks the hand-written part of
// evidence/README.md (after the generated section): a section that quotes
// a decimal number links the campaign directories it reads
// ("[...](NAME/...)"), and every decimal number in it is a value of one of
// those campaigns (tables.csv, summary.json, manifest.json) at the
// precision it is printed with, directly, as a per cent of a fraction, or
// in ms or s of a value in ns, ms or s. A reading of a campaign that is no
// longer published, a number from another campaign, or one typed or
// rounded wrong, fails here, unless it happens to equal another value of
// the campaign: with thousands of values per campaign this catches readings
// of the wrong data, not every slip of a digit.
func TestEvidenceReadingsQuoteTheirCampaigns(t *testing.T) {
	errs, checked, err := checkReadings(filepath.Join("..", "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
	if checked < 100 {
		t.Errorf("only %d numbers checked: the readings or this test's parsing changed", checked)
	}
}

// TestEvidenceReadingCheckFails runs the check on a copy of one campaign
// with readings that quote it right, quote a number it does not have, and
// quote numbers without a link.
func TestEvidenceReadingCheckFails(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "evidence", "e6-control-r50")
	if err := os.MkdirAll(filepath.Join(dir, "c1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", FileSummary, FileTables} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "c1", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readme := "# x\n\n" + EvidenceEnd + "\n\n" +
		"## Right\n\n[c1](c1/report.md): T = 2.672 s, xi 1.020 [1.015, 1.026], version 3.1.1 and `9.999`.\n\n" +
		"## Wrong\n\n[c1](c1/report.md): T = 2.672 s and 12345.678 s.\n\n" +
		"## Unlinked\n\nT = 2.672 s.\n"
	if err := os.WriteFile(filepath.Join(dir, FileEvidenceIndex), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	errs, checked, err := checkReadings(dir)
	if err != nil {
		t.Fatal(err)
	}
	if checked != 6 {
		t.Errorf("checked %d numbers, want 6 (2.672, 1.020, 1.015 and 1.026 under Right, not the version or the code span; 2.672 and 12345.678 under Wrong)", checked)
	}
	joined := strings.Join(errs, "\n")
	if len(errs) != 2 || !strings.Contains(joined, "## Wrong: 12345.678 is no value of c1") || !strings.Contains(joined, "## Unlinked: quotes 1 decimal numbers but links no campaign") {
		t.Errorf("errors:\n%s\nwant one for 12345.678 under Wrong and one for Unlinked", joined)
	}
}

// checkReadings checks the hand-written sections of dir/README.md (after
// the generated section) against the campaigns they link: it returns one
// message per number that is no value of them and per section that quotes
// numbers without a link, and how many numbers it checked.
func checkReadings(dir string) (errs []string, checked int, err error) {
	readme, err := os.ReadFile(filepath.Join(dir, FileEvidenceIndex))
	if err != nil {
		return nil, 0, err
	}
	_, hand, ok := strings.Cut(string(readme), EvidenceEnd)
	if !ok {
		return nil, 0, fmt.Errorf("%s has no %q marker", FileEvidenceIndex, EvidenceEnd)
	}
	for _, sec := range readingSections(hand) {
		head, _, _ := strings.Cut(sec, "\n")
		nums := readingNumbers(sec)
		if len(nums) == 0 {
			continue
		}
		names := linkedCampaigns(dir, sec)
		if len(names) == 0 {
			errs = append(errs, fmt.Sprintf("%s: quotes %d decimal numbers but links no campaign directory of %s (write e.g. [tables.csv](NAME/tables.csv))", head, len(nums), dir))
			continue
		}
		var vals []float64
		for _, n := range names {
			v, err := campaignValues(filepath.Join(dir, n))
			if err != nil {
				return nil, 0, err
			}
			vals = append(vals, v...)
		}
		sort.Float64s(vals)
		for _, tok := range nums {
			if readingConstant(head, tok) {
				continue
			}
			checked++
			if !quotesAValue(tok, vals) {
				errs = append(errs, fmt.Sprintf("%s: %s is no value of %s (tables.csv, summary.json, manifest.json) at that precision", head, tok, strings.Join(names, ", ")))
			}
		}
	}
	return errs, checked, nil
}

func readingConstant(head, tok string) bool {
	for k := range readingConstants {
		if strings.HasPrefix(head, k[0]) && tok == k[1] {
			return true
		}
	}
	return false
}

// readingSections splits markdown at its "## " headings; text before the
// first heading is left out.
func readingSections(md string) []string {
	var out []string
	for _, part := range strings.Split("\n"+md, "\n## ")[1:] {
		out = append(out, "## "+part)
	}
	return out
}

var (
	codeSpan    = regexp.MustCompile("`[^`]*`")
	decimalNum  = regexp.MustCompile(`\d+\.\d+`)
	campaignRef = regexp.MustCompile(`\]\(([a-z0-9][a-z0-9-]*)/`)
	anyNumber   = regexp.MustCompile(`\d+(?:\.\d+)?`)
)

// readingNumbers returns the decimal numbers of a section's prose and
// tables, leaving out code spans and parts of version numbers (3.1.1).
func readingNumbers(sec string) []string {
	sec = codeSpan.ReplaceAllString(sec, "")
	var out []string
	for _, loc := range decimalNum.FindAllStringIndex(sec, -1) {
		i, j := loc[0], loc[1]
		if i > 0 && (isWordByte(sec[i-1]) || sec[i-1] == '.') {
			continue
		}
		if j < len(sec) && sec[j] == '.' && j+1 < len(sec) && sec[j+1] >= '0' && sec[j+1] <= '9' {
			continue
		}
		if j < len(sec) && isWordByte(sec[j]) && sec[j] != 'x' {
			continue
		}
		out = append(out, sec[i:j])
	}
	return out
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// linkedCampaigns returns the campaign directories of dir a section links.
func linkedCampaigns(dir, sec string) []string {
	var out []string
	for _, m := range campaignRef.FindAllStringSubmatch(sec, -1) {
		name := m[1]
		if _, err := os.Stat(filepath.Join(dir, name, FileSummary)); err != nil {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// campaignValues returns every number of a published campaign: the
// numeric fields of tables.csv, and the numbers of summary.json and
// manifest.json, including those inside strings (load averages, the
// command line).
func campaignValues(dir string) ([]float64, error) {
	var vals []float64
	f, err := os.Open(filepath.Join(dir, FileTables))
	if err != nil {
		return nil, err
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, row := range rows {
		for _, field := range row {
			if v, err := strconv.ParseFloat(field, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals = append(vals, v)
			}
		}
	}
	for _, name := range []string{FileSummary, "manifest.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
		}
		vals = appendJSONNumbers(vals, doc)
	}
	return vals, nil
}

func appendJSONNumbers(vals []float64, doc any) []float64 {
	switch d := doc.(type) {
	case float64:
		vals = append(vals, d)
	case string:
		for _, s := range anyNumber.FindAllString(d, -1) {
			if v, err := strconv.ParseFloat(s, 64); err == nil {
				vals = append(vals, v)
			}
		}
	case []any:
		for _, e := range d {
			vals = appendJSONNumbers(vals, e)
		}
	case map[string]any:
		for _, e := range d {
			vals = appendJSONNumbers(vals, e)
		}
	}
	return vals
}

// readingScales are the unit changes a reading may make: none, a fraction
// as a per cent, ns to ms or s, ms to s, s to ms.
var readingScales = []float64{1, 100, 1e-6, 1e-9, 1e-3, 1e3}

// quotesAValue reports whether tok, printed with d decimals, is some value
// of the sorted vals (or its magnitude) under one of readingScales,
// rounded either way at the last printed digit.
func quotesAValue(tok string, sorted []float64) bool {
	x, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return false
	}
	_, frac, _ := strings.Cut(tok, ".")
	half := 0.5*math.Pow(10, -float64(len(frac)))*(1+1e-9) + 1e-12
	for _, m := range readingScales {
		// values v with |v*m| in [x-half, x+half]
		for _, sign := range []float64{1, -1} {
			lo, hi := sign*(x-half)/m, sign*(x+half)/m
			if lo > hi {
				lo, hi = hi, lo
			}
			i := sort.SearchFloat64s(sorted, lo)
			if i < len(sorted) && sorted[i] <= hi {
				return true
			}
		}
	}
	return false
}
