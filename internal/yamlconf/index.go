package yamlconf

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Index maps the key paths of one YAML document ("quic.idle_timeout",
// "listen[1]", "routes[0].upstreams[1]") to their lines and back.
type Index struct {
	pathLine map[string]int
	linePath map[int]string
	// keys and values list the key and value nodes that start on a line,
	// to tell apart several paths on one line ("quic: {colour: blue}").
	keys   map[int][]string
	values map[int][]located
}

// located is a value node and its key path.
type located struct {
	path string
	node *yaml.Node
}

// NewIndex indexes n: a document node (as yaml.Unmarshal into a yaml.Node
// gives) or the mapping or sequence at its top; nil gives an empty index.
func NewIndex(n *yaml.Node) *Index {
	x := &Index{pathLine: map[string]int{}, linePath: map[int]string{}, keys: map[int][]string{}, values: map[int][]located{}}
	if n == nil {
		return x
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return x
		}
		n = n.Content[0]
	}
	x.walk(n, "")
	return x
}

func (x *Index) set(path string, line int) {
	if _, ok := x.pathLine[path]; !ok {
		x.pathLine[path] = line
	}
	if _, ok := x.linePath[line]; !ok || len(path) > len(x.linePath[line]) {
		x.linePath[line] = path
	}
}

func (x *Index) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			x.set(p, k.Line)
			x.keys[k.Line] = append(x.keys[k.Line], p)
			x.values[v.Line] = append(x.values[v.Line], located{p, v})
			x.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			x.set(p, v.Line)
			x.values[v.Line] = append(x.values[v.Line], located{p, v})
			x.walk(v, p)
		}
	}
}

// Line returns the line of path, or of its nearest ancestor present in the
// document, or 0.
func (x *Index) Line(path string) int {
	for p := path; p != ""; {
		if l, ok := x.pathLine[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// Path returns the deepest key path that starts on line, or "".
func (x *Index) Path(line int) string { return x.linePath[line] }

// keyPath returns the path of the key named key on line, or Path(line).
func (x *Index) keyPath(line int, key string) string {
	for _, p := range x.keys[line] {
		if p == key || strings.HasSuffix(p, "."+key) {
			return p
		}
	}
	return x.Path(line)
}

// valuePath returns the path of the value on line with the short tag
// ("!!str", "!!seq") and value (as the YAML decoder quotes it: cut to 7
// bytes and "..." when long; "" for lists and mappings), preferring one for
// which is(path) holds, and the deepest; or Path(line).
func (x *Index) valuePath(line int, tag, value string, is func(path string) bool) string {
	best, bestIs := "", false
	for _, v := range x.values[line] {
		n := v.node
		if n.ShortTag() != tag {
			continue
		}
		cut, long := strings.CutSuffix(value, "...")
		if value != "" && n.Value != value && (!long || len(n.Value) <= 10 || !strings.HasPrefix(n.Value, cut)) {
			continue
		}
		ok := is(v.path)
		if best == "" || ok && !bestIs || ok == bestIs && len(v.path) > len(best) {
			best, bestIs = v.path, ok
		}
	}
	if best == "" {
		return x.Path(line)
	}
	return best
}

// valueAt returns the path of the value that starts at line and column
// (the deepest, where several do), or Path(line).
func (x *Index) valueAt(line, column int) string {
	best := ""
	for _, v := range x.values[line] {
		if v.node.Column == column && len(v.path) > len(best) {
			best = v.path
		}
	}
	if best == "" {
		return x.Path(line)
	}
	return best
}
