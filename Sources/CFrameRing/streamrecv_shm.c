// Compiles the ABI header once inside the package so its _Static_asserts are checked on every build.
#include "streamrecv_shm.h"
