package dedupe

import (
	"encoding/json"
	"net/http"
)

// recordJSON is a Record's stored form, shared by the backends.
type recordJSON struct {
	Status      int         `json:"status"`
	Header      http.Header `json:"header,omitempty"`
	Body        []byte      `json:"body,omitempty"`
	BodyOmitted bool        `json:"body_omitted,omitempty"`
}

// MarshalRecord encodes rec for a store.
func MarshalRecord(rec Record) ([]byte, error) {
	return json.Marshal(recordJSON(rec))
}

// UnmarshalRecord decodes what MarshalRecord encoded.
func UnmarshalRecord(b []byte) (*Record, error) {
	var r recordJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	rec := Record(r)
	return &rec, nil
}
