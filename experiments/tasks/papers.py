"""BibTeX entries of the papers and corpora behind the tasks, named at each ``@TASKS.register``.

A report writes those of the tasks it shows into its ``references.bib``. Only data
that is certain is given: no page numbers where unsure.
"""
from __future__ import annotations

GRAVES_2014 = r"""@misc{graves2014neural,
  author    = {Graves, Alex and Wayne, Greg and Danihelka, Ivo},
  title     = {Neural {Turing} Machines},
  year      = {2014},
  eprint    = {1410.5401},
  archivePrefix = {arXiv}
}"""

GREFENSTETTE_2015 = r"""@inproceedings{grefenstette2015learning,
  author    = {Grefenstette, Edward and Hermann, Karl Moritz and Suleyman, Mustafa and Blunsom, Phil},
  title     = {Learning to Transduce with Unbounded Memory},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {28},
  year      = {2015}
}"""

ZAREMBA_2014 = r"""@misc{zaremba2014learning,
  author    = {Zaremba, Wojciech and Sutskever, Ilya},
  title     = {Learning to Execute},
  year      = {2014},
  eprint    = {1410.4615},
  archivePrefix = {arXiv}
}"""

BA_2016 = r"""@inproceedings{ba2016using,
  author    = {Ba, Jimmy and Hinton, Geoffrey E. and Mnih, Volodymyr and Leibo, Joel Z. and Ionescu, Catalin},
  title     = {Using Fast Weights to Attend to the Recent Past},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {29},
  year      = {2016}
}"""

HAHN_2020 = r"""@article{hahn2020theoretical,
  author    = {Hahn, Michael},
  title     = {Theoretical Limitations of Self-Attention in Neural Sequence Models},
  journal   = {Transactions of the Association for Computational Linguistics},
  volume    = {8},
  pages     = {156--171},
  year      = {2020}
}"""

NANGIA_2018 = r"""@inproceedings{nangia2018listops,
  author    = {Nangia, Nikita and Bowman, Samuel R.},
  title     = {{ListOps}: A Diagnostic Dataset for Latent Tree Learning},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for
               Computational Linguistics: Student Research Workshop},
  pages     = {92--99},
  year      = {2018}
}"""

TAY_2021 = r"""@inproceedings{tay2021long,
  author    = {Tay, Yi and Dehghani, Mostafa and Abnar, Samira and Shen, Yikang and Bahri, Dara and Pham, Philip
               and Rao, Jinfeng and Yang, Liu and Ruder, Sebastian and Metzler, Donald},
  title     = {Long Range Arena: A Benchmark for Efficient Transformers},
  booktitle = {International Conference on Learning Representations},
  year      = {2021}
}"""

KARPATHY_2015 = r"""@misc{karpathy2015charrnn,
  author       = {Karpathy, Andrej},
  title        = {char-rnn: Multi-layer Recurrent Neural Networks for Character-Level Language Models},
  howpublished = {\url{https://github.com/karpathy/char-rnn}},
  note         = {The tiny Shakespeare corpus},
  year         = {2015}
}"""

ELLIOTT_2016 = r"""@inproceedings{elliott2016multi30k,
  author    = {Elliott, Desmond and Frank, Stella and Sima'an, Khalil and Specia, Lucia},
  title     = {{Multi30K}: Multilingual {English}-{German} Image Descriptions},
  booktitle = {Proceedings of the 5th Workshop on Vision and Language},
  pages     = {70--74},
  year      = {2016}
}"""

SENNRICH_2016 = r"""@inproceedings{sennrich2016neural,
  author    = {Sennrich, Rico and Haddow, Barry and Birch, Alexandra},
  title     = {Neural Machine Translation of Rare Words with Subword Units},
  booktitle = {Proceedings of the 54th Annual Meeting of the Association for Computational Linguistics
               (Volume 1: Long Papers)},
  pages     = {1715--1725},
  year      = {2016}
}"""
