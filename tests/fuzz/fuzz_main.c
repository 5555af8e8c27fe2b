/* The libFuzzer entry point of one harness, chosen at compile time:
 *     clang -fsanitize=fuzzer,... -DHL_FUZZ_TARGET=hl_fuzz_safetensors ...
 * (`make fuzz` builds one program per harness, see tools/fuzz.sh). */
#include "tests/fuzz/fuzz_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return HL_FUZZ_TARGET(data, size);
}
