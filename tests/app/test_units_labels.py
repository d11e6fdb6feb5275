"""The Units view's labels read as ``units rank`` reads them (Qt-free: the view's
:class:`RankSource` against the engine's reader and the command)."""
from __future__ import annotations

import pytest

from support import DATA, FIXTURES
from elmo_engine.cli.main import main
from elmo_engine.errors import InputError

CK = ["--checkpoint", str(FIXTURES / "allennlp"), "--device", "cpu"]


def test_the_units_views_labels_are_read_as_units_rank_reads_them(tmp_path, capsys):
    """The view chose CoNLL-U by the file's name (a ``.txt`` CoNLL-U read as TSV: "expected
    'token<TAB>label' (2 fields), found 10 fields") and said one class alone without the file,
    after the model ran. Both now as ``units rank`` says them: CoNLL-U by name or by its first
    word line; one class, naming the file, before the model."""
    from elmo_engine.analysis.units.collect import labelled_file
    from elmo_engine.analysis.units.corpus import holds_conllu
    from elmo_explorer.views.units.model import RankSource

    dev = DATA / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
    head = dev.read_text("utf-8").split("\n\n")[:40]
    as_txt = tmp_path / "dev40.txt"
    as_txt.write_text("\n\n".join(head) + "\n\n", "utf-8")
    assert holds_conllu(as_txt) and not holds_conllu(tmp_path / "absent.txt")
    view = RankSource(str(as_txt), "upos").sentences(10 ** 6)
    cli = labelled_file(as_txt, "upos", conllu=True)
    assert len(view) == len(cli) == 40
    assert [s.labels for s in view] == [s.labels for s in cli]
    assert "dev40.txt (upos)" == RankSource(str(as_txt), "upos").describe()
    tsv = tmp_path / "pairs.txt"
    tsv.write_text("a\tx\nb\ty\n", "utf-8")
    assert not holds_conllu(tsv) and len(RankSource(str(tsv)).sentences(100)) == 1
    one = tmp_path / "one_class.tsv"
    one.write_text("a\tx\nb\tx\n", "utf-8")
    with pytest.raises(InputError) as e:
        RankSource(str(one)).sentences(100)
    assert main(["units", "rank", "--tsv", str(one), "--k", "1", *CK]) == 1
    assert str(e.value) == capsys.readouterr().err.strip().split("error: ", 1)[-1]
    assert "one_class.tsv: one class among the labelled words read (x)" in str(e.value)
