// Package testclock provides a clock for tests that moves only when the
// test moves it.
package testclock
