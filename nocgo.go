//go:build !cgo

// gputop reads NVML through cgo (go-nvml and the C sampling thread): built
// without it, go-nvml fails with "undefined: Return" and more. This file
// stops such a build first, at loading, with one line that says what to do.

package main

import _ "gputop needs cgo: install a C compiler (gcc or clang) and build with CGO_ENABLED=1"
