package console

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// TestDotIDsAreLinkedAndShown: the delivery IDs "." and ".." are linked
// as %20. and %20.., segments a browser does not resolve away (it does
// "." and "..", and "%2E" too), and those links open their pages.
func TestDotIDsAreLinkedAndShown(t *testing.T) {
	f := newFake()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{".", ".."} {
		f.dead["a/"+id] = &sender.Envelope{ID: id, Destination: "a", Class: sender.ClassHTTP4xx, LastStatus: 400, DeadAt: t0, Payload: []byte(`{}`)}
	}
	c := newConsole(t, f)
	list := request(c, View{Base: "/console"}, "GET", "/dead?destination=a", nil).Body.String()
	for _, id := range []string{".", ".."} {
		link := "/console/dead/%20" + id + "?destination=a"
		if !strings.Contains(list, `href="`+link+`"`) {
			t.Errorf("no link %s to %q:\n%s", link, id, list)
			continue
		}
		u, _ := url.Parse(link)
		w := request(c, View{Base: "/console"}, "GET", strings.TrimPrefix(u.RequestURI(), "/console"), nil)
		if w.Code != 200 || !strings.Contains(w.Body.String(), "<title>Delivery "+id+" ") {
			t.Errorf("GET %s: %d\n%s", link, w.Code, w.Body.String())
		}
	}
}
