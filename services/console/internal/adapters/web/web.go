// Package web holds the built front end (web/console, built by Vite into
// dist/), embedded so that the console needs nothing at run time: no CDN,
// no files beside the binary.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// FS is the built front end, rooted at dist/ (index.html, assets/...).
func FS() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// dist is embedded at build time; Sub fails only on a bad name.
		panic(err)
	}
	return sub
}
