//go:build !cgo

// gputop reads NVML through cgo (go-nvml and the C sampling thread): built
// without it, go-nvml fails with "undefined: Return" and more. This file
// stops such a build first, while Go loads the packages, with one line that
// says what to do: its import names no package, so the go command reports
// it, import path and all. The path is a valid one on purpose: Go checks
// the syntax of every file's imports, even of files a build leaves out.

package main

import _ "gputop_needs_cgo/install_a_C_compiler_and_build_with/CGO_ENABLED_1"
