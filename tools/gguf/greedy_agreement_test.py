#!/usr/bin/env python3
"""Tests of greedy_agreement.py's bookkeeping (no servers): llama-server's
log-prob entries matched to steps, the drift measured between the engines,
and the verdict at a divergence. Run by ctest (gguf.greedy_agreement_logic)."""
import importlib.util
import os
import unittest

_spec = importlib.util.spec_from_file_location(
    "greedy_agreement", os.path.join(os.path.dirname(os.path.abspath(__file__)), "greedy_agreement.py"))
ga = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ga)


def entry(token, top):
    return {"id": token, "top_logprobs": [{"id": t, "logprob": lp} for t, lp in top.items()]}


class AlignEntries(unittest.TestCase):
    def test_left_out_entries_leave_their_steps_empty(self):
        # The server left out step 1's entry (a token ending inside a UTF-8 character).
        steps = ga.align_entries([5, 7, 9, 4], [entry(5, {5: -1.0}), entry(9, {9: -2.0}), entry(4, {4: -3.0})])
        self.assertEqual(steps, [{5: -1.0}, None, {9: -2.0}, {4: -3.0}])

    def test_every_entry_present(self):
        steps = ga.align_entries([1, 2], [entry(1, {1: -0.5, 2: -0.7}), entry(2, {2: -0.1})])
        self.assertEqual(steps, [{1: -0.5, 2: -0.7}, {2: -0.1}])

    def test_no_entries(self):
        self.assertEqual(ga.align_entries([3, 3], []), [None, None])


class Noise(unittest.TestCase):
    def test_an_offset_common_to_all_tokens_is_no_drift(self):
        hy = {1: -1.0, 2: -1.5, 3: -2.0}
        ll = {t: v - 0.25 for t, v in hy.items()}
        self.assertEqual(max(ga.pair_noise(hy, ll)), 0.0)

    def test_one_token_moved(self):
        hy = {1: -1.0, 2: -1.5, 3: -2.0}
        ll = dict(hy)
        ll[2] += 0.3
        self.assertAlmostEqual(max(ga.pair_noise(hy, ll)), 0.3)
        self.assertEqual(len(ga.pair_noise(hy, ll)), 3)

    def test_only_steps_both_scored_before_the_divergence_count(self):
        ours, theirs = [1, 2, 3, 4], [1, 2, 3, 5]
        run = ga.first_divergence(ours, False, theirs, False)
        self.assertEqual(run[2:], (3, 4))
        same = {1: -1.0, 2: -2.0}
        drifted = {1: -1.0, 2: -2.5}
        # Step 1 has no llama.cpp entry; step 3 is the divergence and not noise.
        our_lp = [same, drifted, same, drifted]
        their_lp = [same, None, same, same]
        self.assertEqual(ga.run_noise(run, our_lp, their_lp), [0.0, 0.0])


class FirstDivergence(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(ga.first_divergence([1, 2], False, [1, 2], False), ([1, 2], [1, 2], None, 2))

    def test_llama_leaves_the_end_of_sequence_out(self):
        self.assertEqual(ga.first_divergence([1, 2, 9], True, [1, 2], True)[2], None)

    def test_one_engine_ends_early(self):
        ours, theirs, k, n = ga.first_divergence([1, 2], True, [1, 2, 3], False)
        self.assertEqual((k, n, ours[k], theirs[k]), (2, 2, -1, 3))


class Classify(unittest.TestCase):
    # At step 0 hyllm chose 1, llama.cpp chose 2.
    ours, theirs = [1], [2]

    def verdict(self, hy, ll, margin=0.1):
        return ga.classify(self.ours, self.theirs, [hy], [ll], 0, margin)[0]

    def test_near_tie(self):
        self.assertEqual(self.verdict({1: -1.00, 2: -1.02}, {1: -1.01, 2: -1.00}), "near-tie")

    def test_mismatch(self):
        self.assertEqual(self.verdict({1: -1.0, 2: -1.2}, {1: -1.3, 2: -1.0}), "mismatch")

    def test_the_margin_decides(self):
        hy, ll = {1: -1.0, 2: -1.2}, {1: -1.3, 2: -1.0}
        self.assertEqual(self.verdict(hy, ll, margin=0.6), "near-tie")

    def test_a_choice_outside_a_top_list_bounds_the_gap(self):
        # llama.cpp does not list hyllm's token: its log-prob is at most -5.0.
        self.assertEqual(self.verdict({1: -1.0, 2: -1.1}, {2: -1.0, 3: -5.0}), "mismatch")
        # Its list ends close to its choice: the bound says too little.
        self.assertEqual(self.verdict({1: -1.0, 2: -1.01}, {2: -1.0, 3: -1.02}), "unclassified")

    def test_no_log_probs(self):
        self.assertEqual(self.verdict({1: -1.0, 2: -1.1}, None), "unclassified")


if __name__ == "__main__":
    unittest.main()
