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

// The evidence of the network read from `network_path`: the file `evidence_path` when given,
// else NETWORK.evid beside the network when present, else none. `used` (optional) gets the
// file read, "" when none.
Evidence read_evidence_of(const Network& net, const std::string& network_path,
                          const std::string& evidence_path = "", std::string* used = nullptr);

// A network and its evidence (see read_evidence_of), as every command that takes a UAI file reads
// them; `evidence_path` is the evidence file read, "" when none.
struct NetworkWithEvidence {
  Network net;
  Evidence ev;
  std::string evidence_path;
};
NetworkWithEvidence read_network_and_evidence(const std::string& network_path,
                                              const std::string& evidence_path = "");

}  // namespace kinfer::io
