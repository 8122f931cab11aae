"""The three McCoy tasks: question-formation, tense-reinflection(-with-do).

Oracles: the published dev/test/gen files (targets, grammar membership, counts of
docs/tasks.md §8), the grammar files (a CFG recognizer independent of the structural
parser), the paper's Figure 1, and hand-written examples.
"""

from __future__ import annotations

import statistics
import time

import pytest

from fruit.errors import FruitError
from fruit.tasks import get_task, read_tsv
from fruit.tasks.mccoy.lexicon import (
    DETERMINERS,
    NOUNS_PL,
    NOUNS_SG,
    PREPOSITIONS,
    RELATIVIZERS,
    VERBS_INTRANS,
    VERBS_TRANS,
)
from fruit.tasks.mccoy.task import read_grammar
from fruit.tasks.mccoy.templates import allocate
from fruit.tasks.statistics import distribution_distances

MCCOY = ("question-formation", "tense-reinflection", "tense-reinflection-with-do")
TENSE = ("tense-reinflection", "tense-reinflection-with-do")
SPLITS = ("dev", "test", "gen")

SG, PL = set(NOUNS_SG), set(NOUNS_PL)
NUMBER = {**{n: "sg" for n in SG}, **{n: "pl" for n in PL}}
PAST_INTRANS = set("giggled smiled slept swam waited moved changed read ate".split())


def toks(text: str) -> list[str]:
    return text.split()


@pytest.fixture(scope="module")
def published(datasets_dir):
    """slug -> split -> examples, read once."""
    return {
        slug: {split: read_tsv(datasets_dir / slug / f"{split}.tsv") for split in SPLITS}
        for slug in MCCOY
    }


# --------------------------------------------------------------------------- registry


@pytest.mark.parametrize("slug", MCCOY)
def test_registry_and_markers(slug):
    task = get_task(slug)
    assert task.slug == slug
    markers = {"question-formation": ("decl", "quest")}.get(slug, ("PAST", "PRESENT"))
    assert (task.identity_marker, task.transform_marker) == markers
    kind = "first-word" if slug == "question-formation" else "pos-main-verb"
    assert task.partial_kind == kind


# --------------------------------------------------------------------------- published files


@pytest.mark.parametrize("slug", MCCOY)
def test_transform_reproduces_published_targets(published, slug):
    task = get_task(slug)
    for split in SPLITS:
        examples = published[slug][split]
        assert len(examples) == (1000 if split == "dev" else 10000)
        wrong = [(s, t) for s, t in examples if task.target(s) != t]
        assert not wrong, f"{split}: {len(wrong)} mismatches, first {wrong[0]}"


@pytest.mark.parametrize("slug", MCCOY)
def test_published_sources_are_in_the_grammar(published, slug):
    # §8.2: every source parses, with exactly one parse.
    task = get_task(slug)
    for split in SPLITS:
        examples = published[slug][split]
        if split == "dev":
            assert all(task.accepts(s[:-1]) for s, _ in examples)
        parses = [task.grammar.count_parses(s[:-1]) for s, _ in examples]
        assert set(parses) == {1}, f"{split}: parse counts {sorted(set(parses))}"


@pytest.mark.parametrize("slug", TENSE)
def test_published_present_targets_are_in_the_present_grammar(published, slug):
    # The grammar files generate present sentences (docs/tasks.md §4.3, §4.6): every
    # PRESENT target must be one of them, which checks agreement independently.
    task = get_task(slug)
    present = read_grammar(task.grammar_file)
    for split in SPLITS:
        for source, target in published[slug][split]:
            if source[-1] == "PRESENT":
                assert present.accepts(target), (split, source, target)


@pytest.mark.parametrize("slug", MCCOY)
def test_linear_rule_on_published_files(published, slug):
    task = get_task(slug)
    for split in ("dev", "test"):  # §8.4: the linear rule reproduces in-distribution targets
        for source, target in published[slug][split]:
            if source[-1] == task.transform_marker:
                assert task.linear(source[:-1]) == target, (split, source)
    same = sum(task.linear(s[:-1]) == t for s, t in published[slug]["gen"])
    assert same == 0  # §8.5: it differs on every gen line


def test_question_formation_pa_discrimination(published):
    task = get_task("question-formation")
    gen = published["question-formation"]["gen"]
    assert sum(task.linear(s[:-1])[0] == t[0] for s, t in gen) == 0
    assert sum(task.partial_match(task.linear(s[:-1]), t) for s, t in gen) == 0


@pytest.mark.parametrize("slug", TENSE)
def test_tense_pa_discrimination(published, slug):
    # §8.8: the agree-recent output scored against the hierarchical reference.
    task = get_task(slug)

    def passes(split):
        return sum(
            task.partial_match(task.target(s) if s[-1] == "PAST" else task.linear(s[:-1]), t)
            for s, t in published[slug][split]
        )

    assert passes("gen") == 0
    assert passes("dev") == 1000
    assert passes("test") == 10000


@pytest.mark.parametrize("slug", MCCOY)
def test_published_withholding(published, slug):
    task = get_task(slug)
    for split in ("dev", "test"):
        for source, _ in published[slug][split]:
            if source[-1] == task.transform_marker:
                assert not task.is_withheld(source[:-1])
    for source, _ in published[slug]["gen"]:
        assert source[-1] == task.transform_marker
        assert task.is_withheld(source[:-1])
        assert task.gen_filter(source[:-1])


def test_published_subject_modifier_counts(published):
    # docs/tasks.md §4.1/§4.3/§4.6 "subject has RC / PP" columns.
    expected = {
        "question-formation": {"dev": (194, 266), "test": (1832, 2803), "gen": (10000, 0)},
        "tense-reinflection": {"dev": (354, 307), "test": (3359, 3088), "gen": (3955, 6045)},
        "tense-reinflection-with-do": {
            "dev": (383, 331),
            "test": (3980, 2946),
            "gen": (5896, 4104),
        },
    }
    for slug, by_split in expected.items():
        task = get_task(slug)
        for split, (rc, pp) in by_split.items():
            mods = [task.subject_modifier(s) for s, _ in published[slug][split]]
            assert (mods.count("RC"), mods.count("PP")) == (rc, pp), (slug, split)


# --------------------------------------------------------------------------- paper and spec examples


def test_figure1_question_formation():
    task = get_task("question-formation")
    gray = toks("my raven that doesn't sleep does change .")
    assert task.transform(gray) == toks("does my raven that doesn't sleep change ?")
    assert task.linear(gray) == toks("doesn't my raven that sleep does change ?")
    assert task.target(toks("my raven does change . decl")) == toks("my raven does change .")
    assert task.target(toks("my raven does change . quest")) == toks("does my raven change ?")


def test_figure1_tense_reinflection_with_do():
    task = get_task("tense-reinflection-with-do")
    gray = toks("some newts by our yak did smile .")
    assert task.transform(gray) == toks("some newts by our yak do smile .")
    assert task.linear(gray) == toks("some newts by our yak does smile .")
    assert task.target(toks("some newts did smile . PRESENT")) == toks("some newts do smile .")


def test_tense_reinflection_examples():
    task = get_task("tense-reinflection")
    s = toks("our zebra below the vultures changed .")
    assert task.transform(s) == toks("our zebra below the vultures changes .")
    assert task.linear(s) == toks("our zebra below the vultures change .")
    # ORC: the RC verb agrees with the RC's own subject, the main verb with the head.
    s = toks("the yaks that some unicorn entertained applauded her salamanders .")
    assert task.transform(s) == toks(
        "the yaks that some unicorn entertains applaud her salamanders ."
    )
    # SRC on the object: its verb agrees with the object noun; past read = bare read.
    s = toks("my newt comforted her quails who read .")
    assert task.transform(s) == toks("my newt comforts her quails who read .")
    assert task.transform(toks("my newts read .")) == toks("my newts read .")
    assert task.transform(toks("my newt read .")) == toks("my newt reads .")
    assert not task.accepts(toks("my newt read her quails ."))  # read is intransitive


def test_with_do_keeps_polarity_and_lexical_verbs():
    task = get_task("tense-reinflection-with-do")
    s = toks("her peacocks who her salamander didn't entertain did wait .")
    assert task.transform(s) == toks("her peacocks who her salamander doesn't entertain do wait .")
    assert task.linear(s) == toks("her peacocks who her salamander doesn't entertain does wait .")
    assert task.is_withheld(s)
    assert not task.is_withheld(toks("her peacock who her salamander didn't entertain did wait ."))


def test_unknown_marker_and_bad_sentences():
    qf = get_task("question-formation")
    with pytest.raises(FruitError, match="unknown marker 'PRESENT'.*valid choices: decl, quest"):
        qf.target(toks("my raven does change . PRESENT"))
    with pytest.raises(FruitError, match="not a sentence"):
        qf.transform(toks("my raven change does ."))
    with pytest.raises(FruitError, match="auxiliary"):
        qf.transform(toks("my raven changed ."))


# --------------------------------------------------------------------------- grammar membership


def test_grammar_lexicon_matches_the_module_lexicon():
    grammar = read_grammar("mccoy_question.gr")

    def words(symbol):
        return {rule.rhs[0] for rule in grammar.by_lhs[symbol]}

    assert words("Det") == set(DETERMINERS)
    assert words("N_S") == SG and words("N_P") == PL
    assert words("Prep") == set(PREPOSITIONS)
    assert words("Rel") == set(RELATIVIZERS)
    assert words("V_intrans") == set(VERBS_INTRANS)
    assert words("V_trans") == set(VERBS_TRANS)


def test_accepts_hand_written():
    qf = get_task("question-formation")
    assert qf.accepts(toks("my raven that doesn't sleep does change ."))
    assert not qf.accepts(toks("my raven that doesn't sleep do change ."))  # agreement
    assert not qf.accepts(toks("my raven does change"))  # no final '.'
    assert not qf.accepts(toks("does my raven change ?"))  # a target, not a sentence
    tense = get_task("tense-reinflection")
    assert tense.accepts(toks("our zebra below the vultures changed ."))
    assert not tense.accepts(toks("our zebra below the vultures changes ."))  # sources are past
    do = get_task("tense-reinflection-with-do")
    assert do.accepts(toks("some newts by our yak did smile ."))
    assert do.accepts(toks("some newts by our yaks did smile ."))
    # the with-do quirk: a singular head never takes a PP with a plural noun
    assert not do.accepts(toks("some newt by our yaks did smile ."))
    assert not do.accepts(toks("some newts by our yak smiled ."))


def test_subject_modifier_hand_written():
    qf = get_task("question-formation")
    assert qf.subject_modifier(toks("my raven does change .")) == "none"
    assert qf.subject_modifier(toks("my raven by her yaks does change . quest")) == "PP"
    assert qf.subject_modifier(toks("my raven that her yaks do amuse does change .")) == "RC"
    assert qf.subject_modifier(toks("my raven does amuse her yaks that do sleep .")) == "none"


# --------------------------------------------------------------------------- partial accuracy


def test_partial_match_question_formation():
    task = get_task("question-formation")
    reference = toks("does my raven that doesn't sleep change ?")
    assert task.partial_match(reference, reference)
    assert task.partial_match(toks("does my raven sleep ?"), reference)  # first word only
    assert not task.partial_match(toks("doesn't my raven that sleep does change ?"), reference)
    assert not task.partial_match(toks("my raven that doesn't sleep does change ."), reference)
    assert not task.partial_match([], reference)


def test_partial_match_tense_reinflection():
    task = get_task("tense-reinflection")
    reference = toks("the yaks that some unicorn entertains applaud her salamanders .")
    assert task.partial_match(reference, reference)
    # a different RC verb form and object noun: same POS, same main verb -> passes
    assert task.partial_match(
        toks("the yaks that some unicorn entertain applaud our salamander ."), reference
    )
    # linear: main verb agrees with "unicorn"
    assert not task.partial_match(
        toks("the yaks that some unicorn entertains applauds her salamanders ."), reference
    )
    # both wrong: the POS sequence differs
    assert not task.partial_match(toks("the yaks applaud her salamanders ."), reference)
    assert not task.partial_match(
        toks("the yaks that some unicorn entertains applaud her salamanders"), reference
    )


def test_partial_match_tense_reinflection_with_do():
    task = get_task("tense-reinflection-with-do")
    reference = toks("some newts by our yak do smile .")
    assert task.partial_match(reference, reference)
    assert task.partial_match(toks("some newts by our yaks do giggle ."), reference)
    assert not task.partial_match(toks("some newts by our yak does smile ."), reference)  # linear
    assert not task.partial_match(toks("some newts by our yak don't smile ."), reference)
    assert not task.partial_match(toks("some newts do smile ."), reference)
    # subject RC: the main auxiliary is the second auxiliary
    reference = toks("her newts who don't high_five your peacock do change .")
    assert task.partial_match(
        toks("her newts who doesn't high_five your peacock do change ."), reference
    )
    assert not task.partial_match(
        toks("her newts who don't high_five your peacock does change ."), reference
    )


# --------------------------------------------------------------------------- generation

SMALL = {"train": 5000, "dev": 500, "test": 5000, "gen": 2000}


@pytest.fixture(scope="module")
def generated():
    return {slug: get_task(slug).generate(seed=1, sizes=SMALL) for slug in MCCOY}


def tense_conflict(sentence: list[str], with_do: bool) -> bool:
    """docs/tasks.md §4.3: the subject's PP noun, ORC subject or SRC-trans object differs in number."""
    head = NUMBER[sentence[1]]
    if sentence[2] in PREPOSITIONS:
        return NUMBER[sentence[4]] != head
    if sentence[2] in RELATIVIZERS:
        if sentence[3] in DETERMINERS:  # ORC
            return NUMBER[sentence[4]] != head
        verb = sentence[4] if with_do else sentence[3]
        if verb in VERBS_INTRANS or verb in PAST_INTRANS:  # SRC-intrans
            return False
        return NUMBER[sentence[6] if with_do else sentence[5]] != head
    return False


@pytest.mark.parametrize("slug", MCCOY)
def test_generated_sizes_format_and_grammar(generated, slug):
    task = get_task(slug)
    out = generated[slug]
    assert {k: len(v) for k, v in out.items()} == SMALL
    for split, examples in out.items():
        for source, target in examples:
            assert source[-1] in (task.identity_marker, task.transform_marker)
            assert task.accepts(source[:-1]), (split, source)
            assert target == task.target(source)
            assert target[-1] in (".", "?")


@pytest.mark.parametrize("slug", MCCOY)
def test_generated_withholding(generated, slug):
    task = get_task(slug)
    out = generated[slug]
    for split in ("train", "dev", "test"):
        for source, _ in out[split]:
            if source[-1] != task.transform_marker:
                continue
            s = source[:-1]
            if slug == "question-formation":
                assert s[2] not in RELATIVIZERS, source
            else:
                assert not tense_conflict(s, slug.endswith("with-do")), source
    for source, _ in out["gen"]:
        assert source[-1] == task.transform_marker
        s = source[:-1]
        if slug == "question-formation":
            assert s[2] in RELATIVIZERS
            auxiliaries = [t for t in s if t in {"do", "does", "don't", "doesn't"}]
            assert len(auxiliaries) == 2
            first, main = auxiliaries
            assert {first, main} in ({"do", "don't"}, {"does", "doesn't"}), source
        else:
            assert tense_conflict(s, slug.endswith("with-do")), source


def test_generated_question_formation_gen_quota(generated):
    gen = generated["question-formation"]["gen"]
    orc = sum(s[3] in DETERMINERS for s, _ in gen)  # Rel Det N Aux V: an ORC
    assert abs(orc - len(gen) * 3333 / 10000) < 2  # rounding per template; 3,333 at 10k


def test_generated_with_do_quirk(generated):
    # No singular head with a plural PP noun, anywhere (docs/tasks.md §4.3).
    for examples in generated["tense-reinflection-with-do"].values():
        for source, _ in examples:
            for i, t in enumerate(source):
                if t in PREPOSITIONS:
                    assert not (source[i - 1] in SG and source[i + 2] in PL), source


@pytest.mark.parametrize("slug", TENSE)
def test_generated_present_targets_are_in_the_present_grammar(generated, slug):
    task = get_task(slug)
    present = read_grammar(task.grammar_file)
    for split, examples in generated[slug].items():
        for source, target in examples:
            if source[-1] == "PRESENT":
                assert present.accepts(target), (split, source, target)


@pytest.mark.parametrize("slug", MCCOY)
def test_generated_no_duplicates_or_overlaps(generated, slug):
    out = generated[slug]
    sources = {split: [" ".join(s) for s, _ in examples] for split, examples in out.items()}
    for split, lines in sources.items():
        assert len(set(lines)) == len(lines), split
    train = set(sources["train"])
    for split in ("dev", "test", "gen"):
        assert not train & set(sources[split]), split
    assert not set(sources["test"]) & set(sources["gen"])


@pytest.mark.parametrize("slug", MCCOY)
def test_generation_is_deterministic(slug):
    task = get_task(slug)
    sizes = {"train": 300, "dev": 50, "test": 300, "gen": 200}
    a = task.generate(seed=5, sizes=sizes)
    assert a == task.generate(seed=5, sizes=sizes)
    assert a != task.generate(seed=6, sizes=sizes)


def split_statistics(task, examples):
    n = len(examples)
    modifiers = [task.subject_modifier(s) for s, _ in examples]
    return {
        "marker": sum(s[-1] == task.transform_marker for s, _ in examples) / n,
        "subject RC": modifiers.count("RC") / n,
        "subject PP": modifiers.count("PP") / n,
        "median source length": statistics.median(len(s) for s, _ in examples),
    }


@pytest.mark.parametrize("slug", MCCOY)
def test_generated_statistics_match_published(generated, published, slug):
    task = get_task(slug)
    for split in ("test", "gen"):
        ours = split_statistics(task, generated[slug][split])
        theirs = split_statistics(task, published[slug][split])
        for key in ours:
            assert abs(ours[key] - theirs[key]) <= 0.05, (split, key, ours[key], theirs[key])


@pytest.mark.parametrize("slug", MCCOY)
def test_generated_train_distribution_is_the_published_one(generated, published, slug):
    # No published train file offline; train and test are draws from one distribution, so
    # our train split's token, bigram and length distributions must be as close to the
    # published test split's as two halves of that split are to each other.
    for feature, (ours, noise) in distribution_distances(
        generated[slug]["train"], published[slug]["test"]
    ).items():
        assert ours <= 1.5 * noise, (feature, ours, noise)


def test_distribution_distance_sees_a_different_distribution(published):
    # The oracle the test above relies on: the gen split (other constructions, same
    # vocabulary) is far from test, and test's own halves are close.
    test, gen = published["question-formation"]["test"], published["question-formation"]["gen"]
    distances = distribution_distances(gen, test)
    assert distances["bigram"][0] > 3 * distances["bigram"][1]
    assert distances["length"][0] > 3 * distances["length"][1]


def test_generate_rejects_bad_sizes():
    task = get_task("question-formation")
    with pytest.raises(FruitError, match="valid choices"):
        task.generate(seed=1, sizes={"training": 10})
    with pytest.raises(FruitError, match=">= 0"):
        task.generate(seed=1, sizes={"train": -1})


def test_allocate():
    assert allocate(10, [1, 1, 1]) == [4, 3, 3]
    assert sum(allocate(111000, [35, 850, 897, 581])) == 111000
    assert allocate(0, [1, 2]) == [0, 0]


@pytest.mark.slow
@pytest.mark.parametrize("slug", MCCOY)
def test_paper_size_generation(slug, datasets_dir):
    task = get_task(slug)
    start = time.perf_counter()
    out = task.generate(seed=1234)
    seconds = time.perf_counter() - start
    assert seconds < 30, seconds
    assert {k: len(v) for k, v in out.items()} == {
        "train": 100_000,
        "dev": 1_000,
        "test": 10_000,
        "gen": 10_000,
    }
    for split in ("train", "dev", "test"):
        assert not any(
            task.is_withheld(s[:-1]) for s, _ in out[split] if s[-1] == task.transform_marker
        )
    assert all(task.is_withheld(s[:-1]) and task.gen_filter(s[:-1]) for s, _ in out["gen"])
    if slug == "question-formation":  # the ORC quota of docs/tasks.md §4.1
        assert sum(s[3] in DETERMINERS for s, _ in out["gen"]) == 3333
    sources = [" ".join(s) for examples in out.values() for s, _ in examples]
    assert len(set(sources)) == len(sources)
    for split in ("test", "gen"):
        ours = split_statistics(task, out[split])
        theirs = split_statistics(task, read_tsv(datasets_dir / slug / f"{split}.tsv"))
        for key in ours:
            assert abs(ours[key] - theirs[key]) <= 0.05, (split, key, ours[key], theirs[key])
