package resource

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/verifier"
)

func TestParsePreconditions(t *testing.T) {
	tests := []struct {
		ifMatch, ifNoneMatch string
		want                 preconditions
		bad                  bool
	}{
		{ifMatch: `"3"`, want: preconditions{match: []uint64{3}}},
		{ifMatch: `3`, want: preconditions{match: []uint64{3}}},
		{ifMatch: `"3", "5"`, want: preconditions{match: []uint64{3, 5}}},
		{ifMatch: `*`, want: preconditions{matchAny: true}},
		{ifNoneMatch: `*`, want: preconditions{noneMatch: true}},
		{ifMatch: `W/"3"`, bad: true},
		{ifMatch: `"3`, bad: true},
		{ifMatch: `"0"`, bad: true},
		{ifMatch: `"18446744073709551615"`, bad: true},
		{ifMatch: `"-1"`, bad: true},
		{ifMatch: `""`, bad: true},
		{ifNoneMatch: `"3"`, bad: true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("PUT", "/kv/k", nil)
		if tt.ifMatch != "" {
			r.Header.Set("If-Match", tt.ifMatch)
		}
		if tt.ifNoneMatch != "" {
			r.Header.Set("If-None-Match", tt.ifNoneMatch)
		}
		got, err := parsePreconditions(r)
		if tt.bad {
			require.Error(t, err, "%+v", tt)
			continue
		}
		require.NoError(t, err, "%+v", tt)
		require.Equal(t, tt.want, got, "%+v", tt)
	}

	p := preconditions{match: []uint64{3, 5}}
	require.True(t, p.hold(5))
	require.False(t, p.hold(4))
	require.False(t, p.hold(verifier.NoVersion))
	require.True(t, preconditions{matchAny: true}.hold(1))
	require.False(t, preconditions{matchAny: true}.hold(verifier.NoVersion))
	require.True(t, preconditions{noneMatch: true}.hold(verifier.NoVersion))
	require.False(t, preconditions{noneMatch: true}.hold(2))
	require.True(t, preconditions{}.hold(verifier.NoVersion))
}

// FuzzIfMatch feeds arbitrary If-Match headers: parsing never panics, and
// every version it accepts is a real version whose ETag parses back to it.
func FuzzIfMatch(f *testing.F) {
	for _, s := range []string{`"1"`, `*`, `"1", "2"`, `W/"1"`, `"`, ``, `18446744073709551614`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		r := httptest.NewRequest("PUT", "/kv/k", nil)
		r.Header["If-Match"] = []string{h}
		p, err := parsePreconditions(r)
		if err != nil {
			return
		}
		for _, v := range p.match {
			require.NotEqual(t, verifier.NoVersion, v)
			require.NotEqual(t, verifier.AnyVersion, v)
			back, err := parseETag(etag(v))
			require.NoError(t, err)
			require.Equal(t, v, back)
		}
	})
}
