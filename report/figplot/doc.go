// Package figplot draws the report's figures with gonum.org/v1/plot: a new
// plot in the report's style (New, AddLine), box plots laid out by category
// and series with counted far outliers and a log axis when the boxes differ
// by more than LogAxisRatio (AddBoxes), confidence intervals (Intervals),
// log-axis ticks in original units (LogTicks), the colours (Blue, Orange,
// Grey, Other, Shade), and Render, which writes a plot as SVG and PNG with
// its title wrapped and its legend in a column of its own.
//
// It knows nothing of experiments, cells or result files: what a figure
// shows, its words and which series are TCP or QUIC are package report's.
// Output is deterministic: the same plot renders to byte-identical SVG.
// The package holds no state; every function is safe for concurrent use
// on different plots.
package figplot
