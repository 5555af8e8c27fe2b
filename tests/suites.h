/* The Check suites, one per source file under test: HL_SUITE(name) declares
 * Suite *name##_suite(void), defined in tests/test_<name>.c. */
#ifndef HL_TEST_SUITES_H
#define HL_TEST_SUITES_H

#define HL_TEST_SUITES(X) \
    X(tensor)             \
    X(arena)              \
    X(params)             \
    X(rng)                \
    X(graph)              \
    X(gradcheck)          \
    X(gradcheck_tool)     \
    X(op_common)          \
    X(op_table)           \
    X(shape)              \
    X(elementwise)        \
    X(reduce)             \
    X(vmath)              \
    X(isa)                \
    X(gemm)               \
    X(linear)             \
    X(matmul)             \
    X(softmax)            \
    X(mask)               \
    X(attention)          \
    X(layernorm)          \
    X(rmsnorm)            \
    X(residual)           \
    X(gelu)               \
    X(swiglu)             \
    X(rope)               \
    X(qkv_heads)          \
    X(gather_heads)       \
    X(smear)              \
    X(dropout)            \
    X(embedding)          \
    X(cross_entropy)      \
    X(argmax)             \
    X(safetensors)        \
    X(atomic)             \
    X(csv_log)            \
    X(csv_read)           \
    X(vocab)              \
    X(bpe)                \
    X(token_file)         \
    X(tokenize)           \
    X(window_copy)        \
    X(heatmap)            \
    X(plot)               \
    X(mha)                \
    X(optim)              \
    X(step)               \
    X(run)                \
    X(eval)               \
    X(threads)            \
    X(gpt)                \
    X(head_set)           \
    X(checkpoint)         \
    X(toy_task)           \
    X(dist)               \
    X(heads)              \
    X(linalg)             \
    X(detectors)          \
    X(patching)           \
    X(patch_pairs)        \
    X(heads_patch)        \
    X(probe)              \
    X(composition)        \
    X(head_report)        \
    X(cli)                \
    X(faults)             \
    X(fuzz_entry)         \
    X(examples)           \
    X(tokens)

#endif
