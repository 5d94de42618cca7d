package main

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The page and its API take the NATS listener's credentials: nothing
// without one; the token may look, the admin token may also act.
func TestWebViewCredentials(t *testing.T) {
	web, _, _ := serveHTTP(t, `digraph g { m [prompt="x", trigger=manual] }`)
	for _, path := range []string{"/", "/api/sessions", "/api/sessions/w1", "/api/sessions/w1/events", "/assets/app.js"} {
		code, _ := get(t, web+path, "")
		require.Equal(t, http.StatusUnauthorized, code, path)
	}
	code, body := get(t, web+"/api/sessions", "out")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"id":"w1"`)

	// A token in the address becomes a cookie and leaves the address.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar}
	resp, err := client.Get(web + "/?token=out")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/", resp.Request.URL.RequestURI(), "redirected without the token")
	resp, err = client.Get(web + "/api/sessions/w1")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the cookie is the credential")

	post := func(token, header string) int {
		req, err := http.NewRequest(http.MethodPost, web+"/api/sessions/w1/trigger", strings.NewReader(`{"node":"m"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if header != "" {
			req.Header.Set("X-Switchyard", header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("out", "1"), "the outside token may not act")
	require.Equal(t, http.StatusForbidden, post("adm", ""), "an action needs the X-Switchyard header (no cross-site form)")
	require.Equal(t, http.StatusOK, post("adm", "1"))
}

// --http-insecure-loopback serves without a credential, but only requests
// that name a loopback host (DNS rebinding).
func TestWebViewInsecureLoopback(t *testing.T) {
	web, _, _ := serveHTTP(t, `digraph g { a [prompt="x"] }`, "--http-insecure-loopback")
	code, body := get(t, web+"/api/sessions", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"id":"w1"`)
	req, err := http.NewRequest(http.MethodGet, web+"/api/sessions", nil)
	require.NoError(t, err)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
