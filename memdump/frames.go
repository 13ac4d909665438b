package memdump

import (
	"regexp"
	"strings"
)

// torchFile matches the files of torch itself: installed (site-packages,
// dist-packages) or a source checkout's torch/ package by its own
// subpackages, so that a user's /opt/torch/train.py is not taken for one.
var torchFile = regexp.MustCompile(`(^|/)(site|dist)-packages/torch/|(^|/)torch/(nn|optim|autograd|utils|cuda|amp|distributed|_dynamo|_inductor|_functorch|_tensor\.py|functional\.py|_ops\.py)`)

// Allocating is the frame a block is put down to: the innermost Python
// frame outside torch (a model's forward inside nn.Linear is the caller's
// line), else the innermost Python frame, else the innermost frame of any
// kind (a C++ frame of stacks="all"). torch records frames innermost first.
func Allocating(frames []Frame) Frame {
	var python *Frame
	for i := range frames {
		f := &frames[i]
		if !isPython(f.File) {
			continue
		}
		if !torchFile.MatchString(f.File) {
			return *f
		}
		if python == nil {
			python = f
		}
	}
	if python != nil {
		return *python
	}
	if len(frames) > 0 {
		return frames[0]
	}
	return Frame{}
}

// isPython: a Python source file, or code with a pseudo-file name
// (<stdin>, <string>, an IPython cell).
func isPython(file string) bool {
	return strings.HasSuffix(file, ".py") || strings.HasPrefix(file, "<")
}
