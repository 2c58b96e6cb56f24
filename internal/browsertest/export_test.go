package browsertest

// ReadAxe reads axe-core's script from path, for the test of the message
// about a missing install.
var ReadAxe = readAxe
