// Package ui holds the control UI of conch serve: a
// single-page application embedded in the binary (no CDN, no external
// requests) that talks to the gateway through the public /v1 API only.
// The terminal widget is xterm.js, vendored under static/vendor/xterm by
// vendor.sh.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// pages are the client-side routes; each serves index.html.
var pages = []string{"/", "/login", "/approvals", "/sessions", "/nodes", "/agents", "/policy", "/ledger", "/doctor"}

// ContentSecurityPolicy is sent with every UI response. Styles allow
// 'unsafe-inline' because xterm.js sizes its rows with a generated
// <style> element; scripts, connections and everything else are 'self'.
const ContentSecurityPolicy = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves the pages and /assets/*. Unknown paths are 404.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/assets/", http.FileServerFS(sub))
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		p := r.URL.Path
		if strings.HasPrefix(p, "/assets/") && !strings.HasSuffix(p, "/") {
			files.ServeHTTP(w, r)
			return
		}
		if isPage(p) {
			h.Set("Content-Type", "text/html; charset=utf-8")
			w.Write(index)
			return
		}
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("404 page not found\n"))
	})
}

func isPage(p string) bool {
	for _, pg := range pages {
		if p == pg {
			return true
		}
	}
	id, ok := strings.CutPrefix(p, "/sessions/")
	return ok && id != "" && !strings.Contains(id, "/")
}
