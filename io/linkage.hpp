#pragma once
// LINKAGE locus ("data") files and pedigree files, as FASTLINK, Superlink and makeped write
// them (docs/linkage-model.md, "The LINKAGE files"). Every error names the file, the line, the
// column and what was expected.
#include <string>

#include "linkage/model.hpp"

namespace kinfer::io {

// Reads a locus file. Locus types 0 (quantitative) and 2 (binary factors) are rejected.
linkage::LocusFile read_locus_file(const std::string& path);
linkage::LocusFile parse_locus_file(const std::string& path, const std::string& text);

// The shapes of the two LINKAGE files, to name a swap of --dat and --ped: a pedigree file has
// one person a line, every line of the same width and at least six columns, no "<<" comments;
// a locus file starts with a line of four or five numbers (often with a "<<" comment) and its
// lines differ in width.
bool looks_like_pedigree_file(const std::string& text);
bool looks_like_locus_file(const std::string& text);

// Reads a pedigree file against its locus file. Pre- and post-makeped files are told apart by
// their column count; loop-breaker copies in post-makeped files are merged back into one
// person. Checks parents (known, of the right sex, not one's own descendant) and phenotypes.
linkage::PedigreeFile read_pedigree_file(const std::string& path, const linkage::LocusFile& loci);
linkage::PedigreeFile parse_pedigree_file(const std::string& path, const std::string& text,
                                          const linkage::LocusFile& loci);

// The post-makeped text FASTLINK reads (offspring and sibling pointers, proband column), with
// numeric ids 1..n per pedigree (in the order of the people). FASTLINK needs loop breakers on
// looped pedigrees, which this does not add.
std::string format_post_makeped(const linkage::PedigreeFile& peds, const linkage::LocusFile& loci);

}  // namespace kinfer::io
