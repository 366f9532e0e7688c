// Package records owns every contract between the node processes (iotq
// pub, sub, broker), the lab and the report: the typed rows of the CSV
// record files with their headers, the stats JSON of pub and sub, the
// broker's ready file, the cell record (done.json), the manifest and its
// energy parameters, and the names of the files in a results directory.
//
// Writers and readers both use these types, so a column or a field is
// named in one place only. CSV files are read by column name: unknown
// columns are ignored, missing ones read as the zero value, so results
// directories written before a column was added keep loading
// (docs/records.md lists the versions).
//
// The package sits beside internal/ at the bottom of the architecture: it
// imports nothing of iotq's.
package records
