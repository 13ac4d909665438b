package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Prefix never splits a character.
func TestPrefixKeepsCharactersWhole(t *testing.T) {
	s := strings.Repeat("aé€😀", 100)
	for n := 0; n <= len(s)+1; n++ {
		p := Prefix(s, n)
		if len(p) > n || !utf8.ValidString(p) || !strings.HasPrefix(s, p) || (n <= len(s) && n-len(p) > 3) {
			t.Fatalf("Prefix(%d) = %d bytes %q", n, len(p), p)
		}
	}
}
