//go:build !race

package user_test

// raceDetector tells whether the tests run with the race detector.
const raceDetector = false
