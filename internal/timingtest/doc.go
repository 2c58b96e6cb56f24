// Package timingtest measures, in tests, whether two kinds of call to the
// service take the same time, so that a test can show that the time of a
// call tells an observer nothing the answer does not: whether an address
// asked for a link before, whether it has an account.
//
// A measurement times n calls of each kind in pairs, one of each kind in a
// random order, after [WarmUp] pairs that are not timed ([Pairs]), so that
// whatever else the machine does meanwhile slows both kinds alike. Two
// kinds are alike ([Result.Err] of [Compare]) when the median of the
// pairs' ratios is within a factor of [MaxRatio] of 1 and a two-sided
// Mann-Whitney U test ([MannWhitneyP]) finds no difference at the level
// [Alpha]. The ratio is taken pair by pair, not of the kinds' medians:
// a load that comes and goes puts each kind's times in two groups, and
// a median near the middle jumps from one group to the other with a few
// calls, while the two calls of a pair meet the same load. A machine
// busy with other work can still move one measurement apart by chance,
// so [Measure] measures again, with calls of its own, up to [Tries]
// times, and fails the test when no measurement meets both bounds. A
// timing test runs alone, not in parallel.
//
// What an observer times is the service as it is built to run, without
// the race detector, which slows every memory access of Go code several
// times over: SQLite's driver is Go code, so under the detector each row
// that one kind reads and the other does not becomes a difference that
// the service as it runs does not have. A timing test in a binary built
// with the race detector ([RaceDetector]) therefore runs itself again
// with go test -race=false ([RerunWithoutRaceDetector]) and passes or
// fails as that run does.
//
// The package is for tests; no code of the service imports it.
package timingtest
