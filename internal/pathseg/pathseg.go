// Package pathseg escapes one path segment of a URL that names a thing by
// its ID: a delivery ID, a destination, a redrive. url.PathEscape leaves
// "." and "..", which are valid delivery IDs, as they are, and so does
// every escaping a browser or a server accepts as the same segment: a
// browser resolves "..", "%2E%2E" and ".%2e" away before it sends a link,
// and a server's path cleaning does too. Their escaped form is therefore
// one no ID can take: a leading space (an ID is visible ASCII, never a
// space), sent as "%20." and "%20..". Unescape, on the server, reads both
// forms back.
package pathseg

import "net/url"

// Escape is s as one path segment: url.PathEscape's, and "%20." and
// "%20.." for "." and "..".
func Escape(s string) string {
	if s == "." || s == ".." {
		return "%20" + s
	}
	return url.PathEscape(s)
}

// Unescape reads a segment Escape wrote, as the request's escaped path
// holds it.
func Unescape(seg string) (string, error) {
	s, err := url.PathUnescape(seg)
	if err != nil {
		return "", err
	}
	if s == " ." || s == " .." {
		return s[1:], nil
	}
	return s, nil
}
