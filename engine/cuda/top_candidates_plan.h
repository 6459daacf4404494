// How LaunchTopCandidates cuts a row: chunks of kTopCandidatesChunk entries, each sorted in shared
// memory by one block, keeping its top k; the survivors are cut and sorted again until one chunk
// is left. Shared by the kernel and TopCandidatesScratchBytes.
#pragma once

namespace temper::engine::cuda {

constexpr int kTopCandidatesChunk = 2048;

}  // namespace temper::engine::cuda
