"""The one bibliography: the BibTeX entry of every paper a variant, a task, a metric or a statistic comes from.

A registry entry names its papers by citation key beside its class
(``@POSITION.register("alibi", references="press2022train")``); a run records the entries of the
variants it used in its result.json (experiments.record.result.variant_references), and the report adds
those of the metrics and statistics it shows (analysis.paper.bibliography). Each entry is written
here once; only data that is certain is given (no page numbers where unsure).
"""

from __future__ import annotations

import difflib
import re

ENTRIES = (
    # Attention types, and grouped key/value heads (num_kv_heads)
    r"""@inproceedings{vaswani2017attention,
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
               Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  title     = {Attention Is All You Need},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {30},
  year      = {2017}
}""",
    r"""@inproceedings{bahdanau2015neural,
  author    = {Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  title     = {Neural Machine Translation by Jointly Learning to Align and Translate},
  booktitle = {International Conference on Learning Representations},
  year      = {2015},
  eprint    = {1409.0473},
  archivePrefix = {arXiv}
}""",
    r"""@inproceedings{luong2015effective,
  author    = {Luong, Thang and Pham, Hieu and Manning, Christopher D.},
  title     = {Effective Approaches to Attention-based Neural Machine Translation},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  pages     = {1412--1421},
  year      = {2015}
}""",
    r"""@inproceedings{xu2015show,
  author    = {Xu, Kelvin and Ba, Jimmy and Kiros, Ryan and Cho, Kyunghyun and Courville, Aaron and
               Salakhutdinov, Ruslan and Zemel, Richard and Bengio, Yoshua},
  title     = {Show, Attend and Tell: Neural Image Caption Generation with Visual Attention},
  booktitle = {Proceedings of the 32nd International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {37},
  year      = {2015}
}""",
    r"""@inproceedings{jang2017categorical,
  author    = {Jang, Eric and Gu, Shixiang and Poole, Ben},
  title     = {Categorical Reparameterization with {Gumbel}-Softmax},
  booktitle = {International Conference on Learning Representations},
  year      = {2017},
  eprint    = {1611.01144},
  archivePrefix = {arXiv}
}""",
    r"""@misc{bengio2013estimating,
  author    = {Bengio, Yoshua and L{\'e}onard, Nicholas and Courville, Aaron},
  title     = {Estimating or Propagating Gradients Through Stochastic Neurons for Conditional Computation},
  year      = {2013},
  eprint    = {1308.3432},
  archivePrefix = {arXiv}
}""",
    r"""@article{williams1992simple,
  author    = {Williams, Ronald J.},
  title     = {Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement Learning},
  journal   = {Machine Learning},
  volume    = {8},
  number    = {3--4},
  pages     = {229--256},
  year      = {1992}
}""",
    r"""@inproceedings{katharopoulos2020transformers,
  title     = {Transformers are {RNNs}: Fast Autoregressive Transformers with Linear Attention},
  author    = {Katharopoulos, Angelos and Vyas, Apoorv and Pappas, Nikolaos and Fleuret, Fran{\c{c}}ois},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning (ICML)},
  series    = {Proceedings of Machine Learning Research},
  volume    = {119},
  pages     = {5156--5165},
  year      = {2020}
}""",
    r"""@inproceedings{choromanski2021rethinking,
  title     = {Rethinking Attention with Performers},
  author    = {Choromanski, Krzysztof Marcin and Likhosherstov, Valerii and Dohan, David and Song, Xingyou
               and Gane, Andreea and Sarlos, Tamas and Hawkins, Peter and Davis, Jared Quincy
               and Mohiuddin, Afroz and Kaiser, Lukasz and Belanger, David Benjamin
               and Colwell, Lucy J. and Weller, Adrian},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2021}
}""",
    r"""@inproceedings{ainslie2023gqa,
  title     = {{GQA}: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints},
  author    = {Ainslie, Joshua and Lee-Thorp, James and de Jong, Michiel and Zemlyanskiy, Yury
               and Lebr{\'o}n, Federico and Sanghai, Sumit},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  pages     = {4895--4901},
  year      = {2023}
}""",
    r"""@article{shazeer2019fast,
  title   = {Fast Transformer Decoding: One Write-Head is All You Need},
  author  = {Shazeer, Noam},
  journal = {arXiv preprint arXiv:1911.02150},
  year    = {2019}
}""",
    # Position encodings
    r"""@inproceedings{shaw2018self,
  author    = {Shaw, Peter and Uszkoreit, Jakob and Vaswani, Ashish},
  title     = {Self-Attention with Relative Position Representations},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for
               Computational Linguistics: Human Language Technologies, Volume 2 (Short Papers)},
  pages     = {464--468},
  year      = {2018}
}""",
    r"""@inproceedings{press2022train,
  author    = {Press, Ofir and Smith, Noah A. and Lewis, Mike},
  title     = {Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation},
  booktitle = {International Conference on Learning Representations},
  year      = {2022}
}""",
    r"""@article{raffel2020exploring,
  author    = {Raffel, Colin and Shazeer, Noam and Roberts, Adam and Lee, Katherine and Narang, Sharan and
               Matena, Michael and Zhou, Yanqi and Li, Wei and Liu, Peter J.},
  title     = {Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer},
  journal   = {Journal of Machine Learning Research},
  volume    = {21},
  number    = {140},
  pages     = {1--67},
  year      = {2020}
}""",
    r"""@inproceedings{kazemnejad2023impact,
  author    = {Kazemnejad, Amirhossein and Padhi, Inkit and Natesan Ramamurthy, Karthikeyan and Das, Payel and
               Reddy, Siva},
  title     = {The Impact of Positional Encoding on Length Generalization in Transformers},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {36},
  year      = {2023}
}""",
    r"""@inproceedings{gehring2017convolutional,
  author    = {Gehring, Jonas and Auli, Michael and Grangier, David and Yarats, Denis and Dauphin, Yann N.},
  title     = {Convolutional Sequence to Sequence Learning},
  booktitle = {Proceedings of the 34th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {70},
  year      = {2017}
}""",
    r"""@article{su2024roformer,
  title = {{RoFormer}: Enhanced Transformer with Rotary Position Embedding},
  author = {Su, Jianlin and Ahmed, Murtadha and Lu, Yu and Pan, Shengfeng and Bo, Wen and Liu, Yunfeng},
  journal = {Neurocomputing},
  volume = {568},
  pages = {127063},
  year = {2024},
  note = {arXiv:2104.09864, 2021}
}""",
    r"""@article{chen2023extending,
  title = {Extending Context Window of Large Language Models via Positional Interpolation},
  author = {Chen, Shouyuan and Wong, Sherman and Chen, Liangjian and Tian, Yuandong},
  journal = {arXiv preprint arXiv:2306.15595},
  year = {2023}
}""",
    r"""@article{peng2023yarn,
  title = {{YaRN}: Efficient Context Window Extension of Large Language Models},
  author = {Peng, Bowen and Quesnelle, Jeffrey and Fan, Honglu and Shippole, Enrico},
  journal = {arXiv preprint arXiv:2309.00071},
  year = {2023}
}""",
    r"""@inproceedings{sun2023length,
  title = {A Length-Extrapolatable Transformer},
  author = {Sun, Yutao and Dong, Li and Patra, Barun and Ma, Shuming and Huang, Shaohan and Benhaim, Alon and Chaudhary, Vishrav and Song, Xia and Wei, Furu},
  booktitle = {Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics (Volume 1: Long Papers)},
  pages = {14590--14604},
  year = {2023}
}""",
    r"""@inproceedings{li2024functional,
  title = {Functional Interpolation for Relative Positions Improves Long Context Transformers},
  author = {Li, Shanda and You, Chong and Guruganesh, Guru and Ainslie, Joshua and Ontanon, Santiago and Zaheer, Manzil and Sanghai, Sumit and Yang, Yiming and Kumar, Sanjiv and Bhojanapalli, Srinadh},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year = {2024}
}""",
    # Tasks: the papers and corpora behind them
    r"""@misc{graves2014neural,
  author    = {Graves, Alex and Wayne, Greg and Danihelka, Ivo},
  title     = {Neural {Turing} Machines},
  year      = {2014},
  eprint    = {1410.5401},
  archivePrefix = {arXiv}
}""",
    r"""@inproceedings{grefenstette2015learning,
  author    = {Grefenstette, Edward and Hermann, Karl Moritz and Suleyman, Mustafa and Blunsom, Phil},
  title     = {Learning to Transduce with Unbounded Memory},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {28},
  year      = {2015}
}""",
    r"""@misc{zaremba2014learning,
  author    = {Zaremba, Wojciech and Sutskever, Ilya},
  title     = {Learning to Execute},
  year      = {2014},
  eprint    = {1410.4615},
  archivePrefix = {arXiv}
}""",
    r"""@inproceedings{ba2016using,
  author    = {Ba, Jimmy and Hinton, Geoffrey E. and Mnih, Volodymyr and Leibo, Joel Z. and Ionescu, Catalin},
  title     = {Using Fast Weights to Attend to the Recent Past},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {29},
  year      = {2016}
}""",
    r"""@article{hahn2020theoretical,
  author    = {Hahn, Michael},
  title     = {Theoretical Limitations of Self-Attention in Neural Sequence Models},
  journal   = {Transactions of the Association for Computational Linguistics},
  volume    = {8},
  pages     = {156--171},
  year      = {2020}
}""",
    r"""@inproceedings{nangia2018listops,
  author    = {Nangia, Nikita and Bowman, Samuel R.},
  title     = {{ListOps}: A Diagnostic Dataset for Latent Tree Learning},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for
               Computational Linguistics: Student Research Workshop},
  pages     = {92--99},
  year      = {2018}
}""",
    r"""@inproceedings{tay2021long,
  author    = {Tay, Yi and Dehghani, Mostafa and Abnar, Samira and Shen, Yikang and Bahri, Dara and Pham, Philip
               and Rao, Jinfeng and Yang, Liu and Ruder, Sebastian and Metzler, Donald},
  title     = {Long Range Arena: A Benchmark for Efficient Transformers},
  booktitle = {International Conference on Learning Representations},
  year      = {2021}
}""",
    r"""@misc{karpathy2015charrnn,
  author       = {Karpathy, Andrej},
  title        = {char-rnn: Multi-layer Recurrent Neural Networks for Character-Level Language Models},
  howpublished = {\url{https://github.com/karpathy/char-rnn}},
  note         = {The tiny Shakespeare corpus},
  year         = {2015}
}""",
    r"""@inproceedings{elliott2016multi30k,
  author    = {Elliott, Desmond and Frank, Stella and Sima'an, Khalil and Specia, Lucia},
  title     = {{Multi30K}: Multilingual {English}-{German} Image Descriptions},
  booktitle = {Proceedings of the 5th Workshop on Vision and Language},
  pages     = {70--74},
  year      = {2016}
}""",
    r"""@inproceedings{sennrich2016neural,
  author    = {Sennrich, Rico and Haddow, Barry and Birch, Alexandra},
  title     = {Neural Machine Translation of Rare Words with Subword Units},
  booktitle = {Proceedings of the 54th Annual Meeting of the Association for Computational Linguistics
               (Volume 1: Long Papers)},
  pages     = {1715--1725},
  year      = {2016}
}""",
    # Metrics computed by a library that asks to be cited (sacreBLEU: BLEU and chrF, with its signature)
    r"""@inproceedings{papineni2002bleu,
  author    = {Papineni, Kishore and Roukos, Salim and Ward, Todd and Zhu, Wei-Jing},
  title     = {{BLEU}: a Method for Automatic Evaluation of Machine Translation},
  booktitle = {Proceedings of the 40th Annual Meeting of the Association for Computational Linguistics},
  pages     = {311--318},
  year      = {2002}
}""",
    r"""@inproceedings{popovic2015chrf,
  author    = {Popovi{\'c}, Maja},
  title     = {{chrF}: character n-gram {F}-score for automatic {MT} evaluation},
  booktitle = {Proceedings of the Tenth Workshop on Statistical Machine Translation},
  pages     = {392--395},
  year      = {2015}
}""",
    r"""@inproceedings{post2018call,
  author    = {Post, Matt},
  title     = {A Call for Clarity in Reporting {BLEU} Scores},
  booktitle = {Proceedings of the Third Conference on Machine Translation: Research Papers},
  pages     = {186--191},
  year      = {2018}
}""",
    # Statistics the analysis computes
    r"""@article{student1908probable,
  author    = {{Student}},
  title     = {The Probable Error of a Mean},
  journal   = {Biometrika},
  volume    = {6},
  number    = {1},
  pages     = {1--25},
  year      = {1908}
}""",
    r"""@article{welch1947generalization,
  author    = {Welch, Bernard L.},
  title     = {The Generalization of `{Student's}' Problem when Several Different Population Variances are Involved},
  journal   = {Biometrika},
  volume    = {34},
  number    = {1--2},
  pages     = {28--35},
  year      = {1947}
}""",
    r"""@article{holm1979simple,
  author    = {Holm, Sture},
  title     = {A Simple Sequentially Rejective Multiple Test Procedure},
  journal   = {Scandinavian Journal of Statistics},
  volume    = {6},
  number    = {2},
  pages     = {65--70},
  year      = {1979}
}""",
    r"""@article{schuirmann1987comparison,
  author    = {Schuirmann, Donald J.},
  title     = {A Comparison of the Two One-Sided Tests Procedure and the Power Approach for Assessing the
               Equivalence of Average Bioavailability},
  journal   = {Journal of Pharmacokinetics and Biopharmaceutics},
  volume    = {15},
  number    = {6},
  pages     = {657--680},
  year      = {1987}
}""",
    r"""@book{cohen1988statistical,
  author    = {Cohen, Jacob},
  title     = {Statistical Power Analysis for the Behavioral Sciences},
  edition   = {2nd},
  publisher = {Lawrence Erlbaum Associates},
  year      = {1988}
}""",
    # A bounded metric's mean over every divergence rate the seeds leave possible (analysis/stats/unseen_divergence.py)
    r"""@article{clopper1934use,
  author    = {Clopper, C. J. and Pearson, E. S.},
  title     = {The Use of Confidence or Fiducial Limits Illustrated in the Case of the Binomial},
  journal   = {Biometrika},
  volume    = {26},
  number    = {4},
  pages     = {404--413},
  year      = {1934}
}""",
    r"""@article{berger1994p,
  author    = {Berger, Roger L. and Boos, Dennis D.},
  title     = {{P} Values Maximized Over a Confidence Set for the Nuisance Parameter},
  journal   = {Journal of the American Statistical Association},
  volume    = {89},
  number    = {427},
  pages     = {1012--1016},
  year      = {1994}
}""",
    r"""@article{robbins1970statistical,
  author    = {Robbins, Herbert},
  title     = {Statistical Methods Related to the Law of the Iterated Logarithm},
  journal   = {The Annals of Mathematical Statistics},
  volume    = {41},
  number    = {5},
  pages     = {1397--1409},
  year      = {1970}
}""",
    # Anytime-valid decisions: seeds added until a claim is decided (attnlab/sequential.py)
    r"""@article{lai1976confidence,
  author    = {Lai, Tze Leung},
  title     = {On Confidence Sequences},
  journal   = {The Annals of Statistics},
  volume    = {4},
  number    = {2},
  pages     = {265--280},
  year      = {1976}
}""",
    r"""@article{howard2021time,
  author    = {Howard, Steven R. and Ramdas, Aaditya and McAuliffe, Jon and Sekhon, Jasjeet},
  title     = {Time-uniform, Nonparametric, Nonasymptotic Confidence Sequences},
  journal   = {The Annals of Statistics},
  volume    = {49},
  number    = {2},
  pages     = {1055--1080},
  year      = {2021}
}""",
    r"""@article{waudbysmith2024estimating,
  author    = {Waudby-Smith, Ian and Ramdas, Aaditya},
  title     = {Estimating Means of Bounded Random Variables by Betting},
  journal   = {Journal of the Royal Statistical Society Series B: Statistical Methodology},
  volume    = {86},
  number    = {1},
  pages     = {1--27},
  year      = {2024}
}""",
    r"""@article{howard2022sequential,
  author    = {Howard, Steven R. and Ramdas, Aaditya},
  title     = {Sequential Estimation of Quantiles with Applications to {A/B}-testing and Best-arm Identification},
  journal   = {Bernoulli},
  volume    = {28},
  number    = {3},
  pages     = {1704--1728},
  year      = {2022},
  doi       = {10.3150/21-BEJ1388}
}""",
)

_HEAD = re.compile(r"^\s*@\s*([A-Za-z]+)\s*\{\s*([^,\s{}]+)\s*,", re.S)


def entry_key(bibtex: str) -> str:
    """The citation key of one BibTeX entry (``@article{holm1979simple, ...}`` -> ``holm1979simple``)."""
    found = _HEAD.match(bibtex)
    if found is None:
        raise ValueError(f"not a BibTeX entry (expected '@type{{key,'): {bibtex[:60]!r}")
    return found.group(2)


def _by_key(entries: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in entries:
        key = entry_key(entry)
        if key in found:
            raise ValueError(f"attnlab/bibliography.py: the key {key!r} is written twice; keep one entry")
        found[key] = entry
    return found


#: citation key -> BibTeX entry
BIBLIOGRAPHY: dict[str, str] = _by_key(ENTRIES)


def declare(bibtex: str) -> str:
    """Add the entry of a paper a variant outside attnlab (a plugin) comes from; returns its key.

    Declaring an entry again is harmless; another text under a key already here is an error.
    """
    key = entry_key(bibtex)
    if BIBLIOGRAPHY.get(key, bibtex).strip() != bibtex.strip():
        raise ValueError(
            f"the citation key {key!r} is already in attnlab/bibliography.py with another entry; "
            "use that key or choose another"
        )
    BIBLIOGRAPHY[key] = bibtex.strip()
    return key


def lookup(keys: tuple[str, ...] | list[str], origin: str) -> list[str]:
    """The entries of ``keys`` in order; an unknown key is a one-line error naming ``origin`` and the nearest key."""
    missing = [k for k in keys if k not in BIBLIOGRAPHY]
    if missing:
        near = difflib.get_close_matches(missing[0], list(BIBLIOGRAPHY), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(
            f"{origin}: references={missing[0]!r} is not a key of attnlab/bibliography.py{hint} "
            "(add its BibTeX entry there, or declare() it from a plugin)"
        )
    return [BIBLIOGRAPHY[k] for k in keys]
