"""`numpy-transformer generate`: continue prompts with a trained causal language model.

    numpy-transformer generate --checkpoint DIR|HF_FOLDER|HUB_NAME [--max-new-tokens N] [--temperature T] [--top-k K]
                               [--top-p P] [--seed S] "a prompt" ...    (or lines on standard input)

Each prompt is printed with its continuation, one line each. Temperature 0 is greedy decoding;
otherwise the next token is drawn from softmax(z / T), restricted to the K most probable tokens
and to the nucleus of mass P (`numpy_transformer.sampling`), until [EOS].
"""
import sys

from numpy_transformer.cli.common import add_model_cache_argument, add_quiet_argument, add_threads_argument, \
    add_weights_argument, load_language_model, non_negative_integer, non_negative_number, positive_integer, \
    probability, progress_bars, standard_input_lines, utf8_lines


def add_parser(commands):
    generate = commands.add_parser("generate", help="continue prompts with a trained language model (--task lm)",
                                   description="Print each prompt followed by the model's continuation.")
    generate.add_argument("--checkpoint", required=True, metavar="DIR",
                          help="the folder `train --task lm` wrote, a Hugging Face GPT-2 folder, or a Hub name (gpt2)")
    generate.add_argument("prompts", nargs="*", metavar="PROMPT",
                          help="texts to continue (none: the lines of standard input; \"\" starts from nothing)")
    generate.add_argument("--max-new-tokens", type=positive_integer, default=30, metavar="N",
                          help="tokens to add at most (default 30; fewer at [EOS] or the model's maximum length)")
    generate.add_argument("--temperature", type=non_negative_number, default=1.0, metavar="T",
                          help="T of softmax(z / T): 0 greedy, below 1 surer, above 1 more varied (default 1)")
    generate.add_argument("--top-k", type=positive_integer, metavar="K", help="draw among the K most probable tokens")
    generate.add_argument("--top-p", type=probability, metavar="P",
                          help="draw from the smallest set of most probable tokens of mass ≥ P, in (0, 1]")
    generate.add_argument("--seed", type=non_negative_integer, default=0, help="seed of the draws (default 0)")
    add_model_cache_argument(generate)
    add_threads_argument(generate, "generating, one pass through the model per new token")
    add_weights_argument(generate, "generate with")
    add_quiet_argument(generate, "while the prompts are continued, one by one")
    generate.set_defaults(run=command)


def command(args):
    """Print each prompt and its continuation on one line."""
    import numpy as np

    from numpy_transformer.completion import complete

    model, tokenizer, notes = load_language_model(args.checkpoint, "lm", args.cache_dir, args.weights)
    prompts = utf8_lines(args.prompts, "prompt") if args.prompts else standard_input_lines()
    if not prompts:
        raise ValueError("nothing to continue: give prompts as arguments or as lines on standard input")
    texts = complete(model, tokenizer, prompts, np.random.default_rng(args.seed), args.max_new_tokens,
                     args.temperature, args.top_k, args.top_p, progress_bars(args.quiet))
    for note in notes:
        print(note, file=sys.stderr)
    print("\n".join(texts))
    return 0
