#pragma once
// The stand-in runtime API of the SIMT emulator: see cuda_runtime.h.
#include "cuda_runtime.h"
