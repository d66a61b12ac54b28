// Templates across the nodes of a cluster (issue 27 item 5): a template
// built on one node is copied, as its build files, to a node that is to
// run a sandbox of it and lacks it.
//
// Why a copy and not a rebuild from the same spec: a build is not
// reproducible (apt-get installs whatever the mirror has that day, `run`
// steps fetch what they fetch) and takes minutes; the copy is exact
// (the same bytes the first node tested) and takes as long as moving the
// layers over the private network. A build is content-addressed
// (<builds>/<hash>/, core/templates.h), so a copy keeps its hash and the
// receiving node's cache sees it as its own build.
//
// Two node-to-node routes, reached through the router's forwarder (they
// are cluster plumbing, not part of the public API). Both take the
// client's own credentials, passed on by the node placing a create, and
// the node that has the template checks them as for any template use.
//   GET  /v1/cluster/templates/{name}/export         the build dirs of the
//        template and its parents as a tar stream (numeric owners,
//        xattrs: overlay whiteouts and opaque dirs survive), with the
//        paths the receiver rewrites in X-Hutch-* headers
//   POST /v1/cluster/templates/{name}/fetch?from=N   makes this node copy
//        the template from node N: the stream is written to a temp dir
//        under the builds dir (removed at the next start if hutchd dies
//        meanwhile, like a crashed build), unpacked, each build dir it
//        lacks renamed into place with its paths rewritten, and the name
//        registered
// Lives on the I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "auth/credentials.h"
#include "cluster/cluster.h"
#include "core/templates.h"
#include "http/http_context.h"

namespace hutch::api {

class ClusterTemplates {
 public:
  ClusterTemplates(cluster::Cluster* cluster, TemplateRegistry* templates, auth::Credentials* creds)
      : cluster_(cluster), templates_(templates), creds_(creds) {}

  // True when `seg` is one of the routes above (then it was answered).
  asio::awaitable<bool> Serve(HttpContext& ctx, const std::vector<std::string>& seg);

  // The live node (other than `target`) that lists `name`, to fetch it
  // from; "" when none does or `target` lists it already.
  std::string SourceFor(const std::string& name, const std::string& target) const;
  // Whether any live node lists `name`.
  bool Listed(const std::string& name) const;

 private:
  asio::awaitable<void> Export(HttpContext& ctx, const std::string& name);
  asio::awaitable<void> Fetch(HttpContext& ctx, const std::string& name);
  asio::awaitable<Result<nlohmann::json>> FetchFrom(HttpContext& ctx, const std::string& name,
                                                    const std::string& from);

  cluster::Cluster* cluster_;
  TemplateRegistry* templates_;
  auth::Credentials* creds_;
};

}  // namespace hutch::api
