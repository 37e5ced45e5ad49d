// Package apidocs serves MsgMesh's HTTP contract: GET /openapi.yaml (the
// proto/openapi.yaml the server is built from) and GET /docs, a readable
// API page rendered in the browser by Redoc's standalone bundle.
//
// The bundle comes from the npm package redoc, pinned by package-lock.json
// beside this file: `make build` runs `npm ci` here and copies
// node_modules/redoc/bundles/redoc.standalone.js into bundle/, which this
// package embeds. bundle/ is gitignored; a binary built without it (plain
// `go build`) serves a /docs page that says how to build it.
package apidocs

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/proto"
)

// BundleFile is the renderer's file name under bundle/ and /docs/.
const BundleFile = "redoc.standalone.js"

//go:embed all:bundle
var embedded embed.FS

// Bundle is what this binary embeds: bundle/ as built by make build (only
// its README when the build skipped npm).
func Bundle() fs.FS {
	sub, err := fs.Sub(embedded, "bundle")
	if err != nil {
		panic(err) // bundle/ is always embedded (its README is committed)
	}
	return sub
}

// Routes registers GET /openapi.yaml, GET /docs and GET /docs/<bundle
// file> on r, serving the renderer from bundle (see Bundle).
func Routes(r gin.IRoutes, bundle fs.FS) {
	_, err := fs.Stat(bundle, BundleFile)
	built := err == nil
	r.GET("/openapi.yaml", func(c *gin.Context) {
		c.Header("Cache-Control", "no-cache")
		c.Data(http.StatusOK, "application/yaml; charset=utf-8", proto.OpenAPI)
	})
	r.GET("/docs", func(c *gin.Context) {
		c.Header("Content-Type", "text/html; charset=utf-8")
		c.Header("Cache-Control", "no-cache")
		c.Header("Content-Security-Policy", "default-src 'self'; script-src 'self' blob:; worker-src 'self' blob:; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:")
		c.Status(http.StatusOK)
		_ = page.Execute(c.Writer, struct{ Built bool }{built})
	})
	if built {
		for _, name := range []string{BundleFile, BundleFile + ".LICENSE.txt"} {
			r.GET("/docs/"+name, func(c *gin.Context) {
				c.Header("Cache-Control", "no-cache")
				c.FileFromFS(name, http.FS(bundle))
			})
		}
	}
}

var page = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MsgMesh HTTP API</title>
<style>body { margin: 0; font-family: system-ui, sans-serif; } .missing { max-width: 40em; margin: 3em auto; line-height: 1.5; }</style>
</head>
<body>
{{if .Built}}<redoc spec-url="/openapi.yaml" hide-download-button="false"></redoc>
<script src="/docs/redoc.standalone.js"></script>
{{else}}<div class="missing">
<h1>MsgMesh HTTP API</h1>
<p>This msgmesh was built without the API page's renderer. The contract
itself is at <a href="/openapi.yaml">/openapi.yaml</a> (OpenAPI 3).</p>
<p>To get this page, build with <code>make build</code> from the repository
(it needs Node.js and npm: it runs <code>npm ci</code> in
<code>services/msgmesh/apidocs</code> and embeds Redoc's standalone bundle
into <code>bin/msgmesh</code>).</p>
</div>
{{end}}</body>
</html>
`))
