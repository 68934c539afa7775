// Package shlex splits a command line into words the way Python's shlex.split does in its
// default POSIX mode, which the legacy runtime's POST /execute uses: quotes and backslashes are
// honoured, nothing else of a shell is (no variables, globs, pipes or comments).
package shlex

import (
	"errors"
	"strings"
)

var (
	// ErrNoClosingQuote is Python's message verbatim, since legacy clients show it to users.
	ErrNoClosingQuote = errors.New("No closing quotation") //nolint:staticcheck // ST1005: Python's exact text
	// ErrNoEscaped is Python's message verbatim.
	ErrNoEscaped = errors.New("No escaped character") //nolint:staticcheck // ST1005: Python's exact text
)

// Split returns the words of s.
func Split(s string) ([]string, error) {
	words := []string{}
	var word strings.Builder
	inWord := false
	runes := []rune(s)
	for i := 0; i < len(runes); i++ {
		c := runes[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case '\\':
			if i+1 >= len(runes) {
				return nil, ErrNoEscaped
			}
			i++
			word.WriteRune(runes[i])
			inWord = true
		case '\'':
			end := indexFrom(runes, i+1, '\'')
			if end < 0 {
				return nil, ErrNoClosingQuote
			}
			word.WriteString(string(runes[i+1 : end]))
			i, inWord = end, true
		case '"':
			next, err := doubleQuoted(runes, i+1, &word)
			if err != nil {
				return nil, err
			}
			i, inWord = next, true
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// doubleQuoted copies a double-quoted run starting at i into word and returns the index of the
// closing quote. Inside double quotes a backslash escapes only '"' and '\'.
func doubleQuoted(runes []rune, i int, word *strings.Builder) (int, error) {
	for ; i < len(runes); i++ {
		switch c := runes[i]; {
		case c == '"':
			return i, nil
		case c == '\\' && i+1 < len(runes) && (runes[i+1] == '"' || runes[i+1] == '\\'):
			i++
			word.WriteRune(runes[i])
		default:
			word.WriteRune(c)
		}
	}
	return 0, ErrNoClosingQuote
}

func indexFrom(runes []rune, from int, r rune) int {
	for i := from; i < len(runes); i++ {
		if runes[i] == r {
			return i
		}
	}
	return -1
}
