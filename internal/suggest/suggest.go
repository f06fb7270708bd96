// Package suggest finds the known word closest to a mistyped one, for a
// "did you mean ...?" in an error.
package suggest

// Closest returns the word of known nearest to word by edit distance
// (insertions, deletions, substitutions and transpositions of adjacent
// letters: the optimal string alignment distance), if it is near enough
// to be a typo: at most a third of word's length, and at least 1; else "".
// Of words equally near, the first in known wins.
func Closest(word string, known []string) string {
	best, bestDist := "", max(1, len([]rune(word))/3)+1
	for _, k := range known {
		if d := distance(word, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j].
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
