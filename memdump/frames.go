package memdump

import (
	"regexp"
	"strings"
)

// torchFile matches the files of torch itself: installed (site-packages,
// dist-packages) or a source checkout's torch/ package by its own
// subpackages, so that a user's /opt/torch/train.py is not taken for one.
var torchFile = regexp.MustCompile(`(^|/)(site|dist)-packages/torch/|(^|/)torch/(nn|optim|autograd|utils|cuda|amp|distributed|_dynamo|_inductor|_functorch|_tensor\.py|functional\.py|_ops\.py)`)

// frameInfo is a frame with what allocating asks of its file, worked out
// once per frame.
type frameInfo struct {
	Frame
	python bool // a Python file
	torch  bool // one of torch's own (torchFile)
}

// allocPick finds the frame a block is put down to: the innermost Python
// frame outside torch (a model's forward inside nn.Linear is the caller's
// line), else the innermost Python frame, else the innermost frame of any
// kind (a C++ frame of stacks="all"). torch records frames innermost
// first; add them in that order.
type allocPick struct {
	first, python       Frame
	hasFirst, hasPython bool
}

// add takes the next frame outwards; true when it is the answer and no
// further frame matters.
func (p *allocPick) add(f frameInfo) bool {
	if !p.hasFirst {
		p.first, p.hasFirst = f.Frame, true
	}
	if f.python && (!f.torch || !p.hasPython) {
		p.python, p.hasPython = f.Frame, true
	}
	return f.python && !f.torch
}

func (p *allocPick) frame() Frame {
	if p.hasPython {
		return p.python
	}
	return p.first
}

// isPython: a Python source file, or code with a pseudo-file name
// (<stdin>, <string>, an IPython cell).
func isPython(file string) bool {
	return strings.HasSuffix(file, ".py") || strings.HasPrefix(file, "<")
}
