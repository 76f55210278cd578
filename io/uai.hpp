#pragma once
// UAI network files (MARKOV and BAYES) and evidence files (the UAI 2014 one-line form
// `k v1 x1 ... vk xk` and the older form that starts with a sample count line).
#include <string>

#include "engine/model.hpp"

namespace kinfer::io {

// Reads NETWORK (optionally gzip-compressed). Throws InputError on any malformed content.
Network read_uai(const std::string& path);

// Reads an evidence file against `net`. Throws InputError naming the line on bad content.
Evidence read_evidence(const std::string& path, const Network& net);

// The evidence file used when none is given: NETWORK.evid beside the network (also tried with
// a .gz suffix stripped), or "" when there is none.
std::string default_evidence_path(const std::string& network_path);

}  // namespace kinfer::io
