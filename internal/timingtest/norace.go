//go:build !race

package timingtest

// RaceDetector tells whether the binary was built with the race detector.
const RaceDetector = false
