package host

// hostEnvRules are this system's: keys fold case, ";" in PATH. Not yet
// run on Windows.
var hostEnvRules = windowsEnvRules
