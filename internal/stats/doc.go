// Package stats holds the descriptive statistics that the iotq report and
// `iotq sub --stats` use:
// mean, median, percentiles (linear interpolation between closest ranks,
// Hyndman and Fan type 7, the default of R and NumPy), sample standard
// deviation, relative standard deviation, ratios of means and percentile
// bootstrap confidence intervals with a fixed seed.
//
// Every function is pure: it does not modify its arguments (inputs are
// copied before sorting) and keeps no state, so all of them are safe for
// concurrent use. The package imports only the standard library.
package stats
