package report

import "errors"

// ErrNotResults says that a directory holds none of the lab's result files.
var ErrNotResults = errors.New("not a results directory")
