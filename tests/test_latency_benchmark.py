"""`numpy-transformer bench latency`: the PyTorch incremental decoder it races against decodes the
same weights into the same tokens as this project's beam search and generation (post-norm and
pre-norm, sinusoidal and learned positions, tied and untied projections), and the command runs
end to end on the tiny configurations. No timing is asserted."""
import numpy as np
import pytest

from numpy_transformer.benchmarks import latency
from numpy_transformer.benchmarks.workloads import PAD_ID
from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import DecoderOnlyTransformer
from numpy_transformer.model import Transformer
from run_helpers import needs_two_cores

OPTIONS = [dict(), dict(norm_placement="pre", norm_variant="torch", positional="learned", tie_embeddings=True,
                        activation="gelu")]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.torch
@pytest.mark.parametrize("options", OPTIONS, ids=["post-norm", "pre-norm-learned-tied"])
def test_the_pytorch_incremental_beam_search_finds_this_project_s_tokens(torch, options):
    config = TransformerConfig(50, 60, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.1, pad_id=PAD_ID, **options)
    model, source, eos_id = latency.beam_case(Transformer(config, np.random.default_rng(3)).eval())
    ours = latency.numpy_translate(model, source, eos_id)
    assert len(ours) == latency.STEPS
    assert latency.torch_translate(torch, latency.torch_translator(torch, model), source, PAD_ID) == ours


@pytest.mark.torch
@pytest.mark.parametrize("options", [dict(), dict(norm_placement="post", positional="sinusoidal")],
                         ids=["lm-defaults", "post-norm-sinusoidal"])
def test_the_pytorch_incremental_generation_finds_this_project_s_tokens(torch, options):
    config = TransformerConfig.decoder_only(60, d_model=16, n_heads=2, d_ff=32, n_layers=2, pad_id=PAD_ID,
                                            max_len=latency.PROMPT + latency.NEW_TOKENS, **options)
    model = DecoderOnlyTransformer(config, np.random.default_rng(2)).eval()
    prompt = np.random.default_rng(0).integers(3, 60, (1, latency.PROMPT))
    ours = latency.numpy_generate(model, prompt)
    assert len(ours) == latency.NEW_TOKENS and len(set(ours)) > 1
    assert latency.torch_generate(torch, latency.torch_generator(torch, model), prompt) == ours


@pytest.mark.numerics
@pytest.mark.parametrize("options", [dict(), dict(norm_placement="post", positional="sinusoidal", norm_variant="thesis",
                                                activation="relu", tie_embeddings=False)],
                         ids=["lm-defaults", "post-norm-sinusoidal-untied"])
def test_the_plain_array_generator_computes_the_model_s_logits_step_by_step(options):
    """PlainNumpyGenerator, the same step without the engine, gives the model's own logits (the
    prompt at once, then one token at a time through both caches), and the same tokens. The two
    differed by 4.8e-7 at most under OpenBLAS's Haswell, SkylakeX and Sandybridge kernels (Intel
    Xeon): atol 1e-5 leaves a margin of 20."""
    config = TransformerConfig.decoder_only(60, d_model=16, n_heads=2, d_ff=32, n_layers=2, pad_id=PAD_ID,
                                            max_len=latency.PROMPT + latency.NEW_TOKENS, **options)
    model = DecoderOnlyTransformer(config, np.random.default_rng(2)).eval()
    generator, cache = latency.PlainNumpyGenerator(model), {}
    ids = np.random.default_rng(0).integers(3, 60, (1, 12))
    for start, end in [(0, 8), (8, 9), (9, 10), (10, 12)]:
        expected = model(ids[:, start:end], cache, start).data[:, -1]
        assert np.allclose(generator.step(ids[:, start:end], start), expected, rtol=1e-4, atol=1e-5)
    assert latency.plain_numpy_generate(model, ids[:, :latency.PROMPT]) == \
        latency.numpy_generate(model, ids[:, :latency.PROMPT])


@pytest.mark.numerics
@pytest.mark.parametrize("options", OPTIONS, ids=["post-norm", "pre-norm-learned-tied"])
def test_the_plain_array_translator_computes_the_model_s_log_probabilities_and_beams(options):
    """PlainNumpyTranslator gives IncrementalDecoder's log-probabilities at every step of a beam
    search, the parents' caches reordered in both, and the same tokens. The two differed by
    1.4e-6 at most (Haswell's kernels; 9.5e-7 Sandybridge's, none SkylakeX's, on an Intel Xeon):
    atol 1e-5 leaves a margin of 7."""
    from numpy_transformer.decoding import IncrementalDecoder
    from numpy_transformer.benchmarks.plain_decoding import PlainNumpyTranslator

    config = TransformerConfig(50, 60, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.1, pad_id=PAD_ID, **options)
    model, source, eos_id = latency.beam_case(Transformer(config, np.random.default_rng(3)).eval())
    ours, plain = IncrementalDecoder(model, source, copies=3), PlainNumpyTranslator(model, source, copies=3)
    generator = np.random.default_rng(1)
    for _ in range(5):
        tokens = generator.integers(3, 60, 3)
        np.testing.assert_allclose(plain.log_probs(tokens), ours.log_probs(tokens), rtol=0, atol=1e-5)
        rows = generator.integers(0, 3, 3)
        ours.select(rows), plain.select(rows)
    assert latency.plain_numpy_translate(model, source, eos_id) == latency.numpy_translate(model, source, eos_id)


def test_the_plain_array_yardsticks_refuse_the_models_they_do_not_cover():
    from numpy_transformer.benchmarks.plain_decoding import covers

    config = TransformerConfig.decoder_only(60, d_model=16, n_heads=2, d_ff=32, n_layers=1, pad_id=PAD_ID,
                                            activation="swiglu")
    assert not covers(config)
    with pytest.raises(ValueError, match="PlainNumpyGenerator covers full attention"):
        latency.PlainNumpyGenerator(DecoderOnlyTransformer(config, np.random.default_rng(0)))


def test_bench_latency_runs_on_the_tiny_configurations_and_says_what_it_compared():
    lines = []
    results = latency.run(threads=1, runs=1, log=lines.append, configs=("tiny", "gpt-tiny"))
    assert [(r["task"], r["config"]) for r in results] == [("translate", "tiny"), ("generate", "gpt-tiny")]
    assert all(r["numpy_ms"] > 0 for r in results)
    assert lines[0].startswith("translate one sentence of 12 tokens, beam 4, 20 steps (tiny)")
    assert all(r["plain_numpy_ms"] > 0 for r in results) and all("plain array" in line for line in lines)
    for result, line in zip(results, lines):
        if result["torch_ms"] is None:
            assert "PyTorch not installed" in line
        else:
            assert result["same_tokens"] and "the same tokens" in line


@needs_two_cores
def test_the_command_line_has_bench_latency():
    from numpy_transformer.cli import build_parser
    from numpy_transformer.cli.bench import bench_latency_command

    args = build_parser().parse_args(["bench", "latency", "--threads", "2", "--json"])
    assert (args.runs, args.blas_threads, args.json, args.run) == (7, 2, True, bench_latency_command)
