"""Graph attention on Zachary's karate club: semi-supervised node classification from two labels.

    python examples/gat_karate.py                       # seed 0, a few seconds
    python examples/gat_karate.py --seed 3 --out runs/karate-seed3

The data is real and ships with networkx: `networkx.karate_club_graph()`, the 34 members of a
university karate club (Zachary, 1977) and the 78 friendships between them; the club later split
in two, and each node's 'club' attribute says which faction the member joined ('Mr. Hi', the
instructor's, or 'Officer', the administrator's). The features are the identity (a one-hot
vector per member, so the model knows nothing but the graph) and exactly one member per faction
is labelled: node 0, the instructor, and node 33, the administrator. The other 32 are to be
classified.

The model is the paper's transductive GAT (numpy_transformer.beyond_text.graph.GAT): 8 heads
of 8 features concatenated, ELU, one output head, dropout 0.6, trained with Adam (lr 0.005,
weight decay 5e-4) on the cross-entropy of the two labelled members. The figure draws the
graph coloured by the prediction, the two labelled members and the misclassified ones marked,
each friendship drawn as wide and as dark as the first layer's attention along it (the mean
over heads and both directions); it is OUT/gat_karate.png (--out, default
runs/examples/gat_karate/; --no-figure for none). --threads N: BLAS threads (default 1). The
last line printed is the accuracy on the 32 unlabelled members.
"""
import argparse

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, progress, require,
                                                   run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

import autograd.functional as F  # noqa: E402
from autograd import Tensor, no_grad  # noqa: E402
from autograd.engine_room.fused_adam import share_updates  # noqa: E402
from autograd.optim import Adam  # noqa: E402
from numpy_transformer.beyond_text.graph import GAT, attention_graph  # noqa: E402

LABELLED = np.array([0, 33])                 # the instructor and the administrator


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=200, help="full-graph training steps (default 200)")
    parser.add_argument("--lr", type=float, default=0.005, help="Adam's learning rate (default 0.005, the paper's)")
    parser.add_argument("--weight-decay", type=float, default=5e-4, help="L2 weight decay (default 5e-4)")
    parser.add_argument("--hidden", type=int, default=8, help="features per hidden head (default 8)")
    parser.add_argument("--heads", type=int, default=8, help="hidden heads (default 8)")
    parser.add_argument("--dropout", type=float, default=0.6, help="dropout on inputs and weights (default 0.6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the dropout masks")
    add_example_arguments(parser, __file__)
    parser.add_argument("--no-figure", action="store_true", help="draw no figure (and need no matplotlib)")
    return parser.parse_args(argv)


def karate_club():
    """(features, edges with both directions, labels 0 = Mr. Hi / 1 = Officer, the networkx graph)."""
    import networkx as nx

    graph = nx.karate_club_graph()
    pairs = np.array(graph.edges())
    edges = (np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]]))
    labels = np.array([graph.nodes[v]["club"] != "Mr. Hi" for v in graph.nodes], dtype=np.int64)
    return np.eye(len(labels), dtype=np.float32), edges, labels, graph


def train(model, x, graph, labels, args):
    """Adam on the cross-entropy of the labelled members, every step on the whole graph."""
    optimizer = share_updates(Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay), args.threads)
    model.train()
    for _ in progress(range(args.epochs), desc="training", unit="epoch"):
        loss = F.cross_entropy(model(x, graph)[LABELLED], labels[LABELLED])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def predict(model, x, graph):
    """(the predicted faction of every member, the first layer's attention per edge averaged over heads)."""
    model.eval()
    with no_grad():
        logits = model(x, graph)
    return logits.data.argmax(axis=-1), model.hidden.last_weights.mean(axis=-1)


def draw(nx_graph, graph, predicted, labels, attention, path):
    """The club coloured by prediction: labelled members as squares, misclassified ones ringed in
    red; each friendship as wide and dark as the attention along it (mean of both directions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    strength = {}
    for i, j, a in zip(graph.queries, graph.keys, attention):
        if i != j:
            strength[frozenset((i, j))] = strength.get(frozenset((i, j)), 0) + a / 2
    edges = list(nx_graph.edges())
    weights = np.array([strength[frozenset(edge)] for edge in edges])
    scaled = weights / weights.max()
    position = nx.spring_layout(nx_graph, seed=4)
    figure, axis = plt.subplots(figsize=(7, 6))
    nx.draw_networkx_edges(nx_graph, position, edgelist=edges, width=0.5 + 4 * scaled,
                           edge_color=[(0, 0, 0, 0.15 + 0.85 * s) for s in scaled], ax=axis)
    colours = np.where(predicted == 0, "tab:blue", "tab:orange")
    wrong = predicted != labels
    unlabelled = np.setdiff1d(np.arange(len(labels)), LABELLED)
    for nodes, shape in ((unlabelled, "o"), (LABELLED, "s")):
        nx.draw_networkx_nodes(nx_graph, position, nodelist=list(nodes), node_color=list(colours[nodes]),
                               node_shape=shape, node_size=420 if shape == "s" else 260,
                               edgecolors=["red" if wrong[v] else "black" for v in nodes],
                               linewidths=[3 if wrong[v] else 0.8 for v in nodes], ax=axis)
    nx.draw_networkx_labels(nx_graph, position, font_size=8, ax=axis)
    accuracy = 1 - wrong[unlabelled].mean()
    axis.set_title(f"GAT on Zachary's karate club: blue Mr. Hi, orange Officer (predicted)\n"
                   f"squares: the two labelled members; red rings: misclassified "
                   f"({wrong[unlabelled].sum()} of 32, accuracy {accuracy:.2f})\n"
                   f"edge width and darkness: first-layer attention, mean over heads", fontsize=9)
    axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require("networkx", *(() if args.no_figure else ("matplotlib",)))
    features, edges, labels, nx_graph = karate_club()
    print(f"data: networkx.karate_club_graph(), {len(labels)} members, {len(edges[0]) // 2} friendships; "
          f"labelled: members {LABELLED.tolist()}")
    rng = np.random.default_rng(args.seed)
    model = GAT(len(labels), 2, rng, d_hidden=args.hidden, n_heads=args.heads, dropout=args.dropout)
    graph = attention_graph(edges, len(labels))
    x = Tensor(features)
    loss = train(model, x, graph, labels, args)
    predicted, attention = predict(model, x, graph)
    unlabelled = np.setdiff1d(np.arange(len(labels)), LABELLED)
    accuracy = float(np.mean(predicted[unlabelled] == labels[unlabelled]))
    print(f"seed {args.seed}, {args.epochs} epochs: final training loss {loss:.4f}; misclassified: "
          f"{[int(v) for v in unlabelled if predicted[v] != labels[v]]}")
    if not args.no_figure:
        path = output_folder(args) / "gat_karate.png"
        print(f"figure: {draw(nx_graph, graph, predicted, labels, attention, path)}")
    print(f"accuracy: {accuracy:.2f}")
    return accuracy


if __name__ == "__main__":
    run_example(main, __file__)
