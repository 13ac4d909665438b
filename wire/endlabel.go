package wire

import "regexp"

// An end row closes a run: its process's memory should be back, so it gets
// a verdict. A label that says "end" as a word ("Training end", "Epoch
// end"), ends in "(end)" (a phase's end row, "eval (end)"), or speaks of a
// cleanup that is not still to come ("After cleanup", "cleanup", but not
// "Before cleanup" or "pre-cleanup") is one. The agent applies the same
// rule (testdata/protocol/end_labels.json holds both to it).
var (
	endWord     = regexp.MustCompile(`(?i)(\bend\b|\(end\)\s*$)`)
	cleanupWord = regexp.MustCompile(`(?i)clean[ _-]?up`)
	beforeWord  = regexp.MustCompile(`(?i)(\bbefore\b|\bpre\b|\bpre[ _-]?clean)`)
)

// IsEndLabel reports whether a label marks the end of a run.
func IsEndLabel(label string) bool {
	if endWord.MatchString(label) {
		return true
	}
	return cleanupWord.MatchString(label) && !beforeWord.MatchString(label)
}
