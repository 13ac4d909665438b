// Package demo embeds a recording made on a real NVIDIA H200 during a real
// PyTorch training run, so `gputop --demo` shows the real thing without a GPU.
package demo

import _ "embed"

// Title says what the demo shows.
const Title = "PyTorch MLP training on an NVIDIA H200, recorded 2026-12-01 with the agent attached"

// Recording is the embedded recording file (see recording/FORMAT.md).
//
//go:embed demo.gputop
var Recording []byte
