// The web console (console/, docs/console.md) as hutchd serves it: the
// static assets the console's build wrote (index.html and content-hashed
// assets/*), under /ui/, without a key — the console asks for the key
// itself and sends it only as a bearer header to /v1. Every answer carries
// the console's Content-Security-Policy: scripts and styles only from this
// origin, no inline script, no eval, no frames, connections (fetch,
// WebSocket) only back to this origin.
#pragma once

#include <memory>
#include <string>

#include "http/router.h"
#include "http/static_files.h"

namespace hutch::api {

// The CSP of every /ui answer. (style-src-elem allows inline <style>
// elements: xterm.js's DOM renderer writes its cell metrics and theme
// into <style> elements it creates at run time; style attributes in
// markup stay refused.)
extern const char kConsoleCsp[];

// The directory hutchd serves the console from when --ui-dir is not given:
// `ui` beside the hutchd binary (where the build writes it).
std::string DefaultConsoleDir(const std::string& exe_dir);

// Adds GET /ui/{path*}: index.html for /ui/, the file of that relative
// path below it, and for /ui a redirect to /ui/. `files` null: the console
// was not built, and /ui answers 404 saying so with `dir`.
void RegisterConsole(Router& r, std::shared_ptr<const StaticFiles> files, std::string dir);

}  // namespace hutch::api
