package records

// Version is the version of the record contracts that this package writes;
// manifest.json records it as records_version. A manifest without it was
// written before the contracts had a home (version 0); its files have the
// same columns (docs/records.md). Version 2 appended protocol to cells.csv
// and accepted_ns to messages.csv; version 3 added pattern
// reconnect-early, quic_0rtt to cells.csv and early_sent_ns to
// connections.csv; version 4 measures the manifest's host probe when its
// goroutine runs (no longer the timer's back-dated time) and adds the
// publishers' send lateness and the admission of cells to the manifest's
// emulator_timing (status fail instead of refused) and a timing record to
// done.json. Readers read by column name, so older files read with
// those empty. Version 6 adds pattern path-change (E10: done.json's
// path_change, change_at_ns, change_link; rep-N/e10.csv) and drop_nat to
// links.csv; version 7 pattern multi-topic (E9): topic in pub records,
// topics, large_size and large_interval_ns at the end of cells.csv;
// version 8 ready_ns in pub records: the send lateness that the timing
// guard judges leaves out a hand-over that blocked (the transport, not
// the host).
const Version = 8

// Files of a results directory DIR (docs/records.md). Per-cell record files
// in DIR/cells/CELL/ have the same header as their aggregate in DIR.
const (
	FileMessages    = "messages.csv"
	FileConnections = "connections.csv"
	FileLinks       = "links.csv"
	FileCPU         = "cpu.csv"
	FileCompletions = "completions.csv"
	FileCells       = "cells.csv"
	FileDone        = "done.json"
	FileManifest    = "manifest.json"
	FileScenario    = "scenario.yaml"
	FileCampaign    = "campaign.json"
	FilePubPcap     = "pub.pcap" // the publisher's link end, in DIR/cells/CELL/
	DirCells        = "cells"
)
