"""BibTeX entries of the papers the attention types and position encodings implement.

Each registration names the entries it comes from (``@ATTENTION.register("local",
references=LUONG_2015)``); a report writes those of the variants it shows into its
``references.bib``. Only data that is certain is given: no page numbers where unsure.
"""
from __future__ import annotations

VASWANI_2017 = r"""@inproceedings{vaswani2017attention,
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
               Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  title     = {Attention Is All You Need},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {30},
  year      = {2017}
}"""

BAHDANAU_2015 = r"""@inproceedings{bahdanau2015neural,
  author    = {Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  title     = {Neural Machine Translation by Jointly Learning to Align and Translate},
  booktitle = {International Conference on Learning Representations},
  year      = {2015},
  eprint    = {1409.0473},
  archivePrefix = {arXiv}
}"""

LUONG_2015 = r"""@inproceedings{luong2015effective,
  author    = {Luong, Thang and Pham, Hieu and Manning, Christopher D.},
  title     = {Effective Approaches to Attention-based Neural Machine Translation},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  pages     = {1412--1421},
  year      = {2015}
}"""

XU_2015 = r"""@inproceedings{xu2015show,
  author    = {Xu, Kelvin and Ba, Jimmy and Kiros, Ryan and Cho, Kyunghyun and Courville, Aaron and
               Salakhutdinov, Ruslan and Zemel, Richard and Bengio, Yoshua},
  title     = {Show, Attend and Tell: Neural Image Caption Generation with Visual Attention},
  booktitle = {Proceedings of the 32nd International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {37},
  year      = {2015}
}"""

JANG_2017 = r"""@inproceedings{jang2017categorical,
  author    = {Jang, Eric and Gu, Shixiang and Poole, Ben},
  title     = {Categorical Reparameterization with {Gumbel}-Softmax},
  booktitle = {International Conference on Learning Representations},
  year      = {2017},
  eprint    = {1611.01144},
  archivePrefix = {arXiv}
}"""

BENGIO_2013 = r"""@misc{bengio2013estimating,
  author    = {Bengio, Yoshua and L{\'e}onard, Nicholas and Courville, Aaron},
  title     = {Estimating or Propagating Gradients Through Stochastic Neurons for Conditional Computation},
  year      = {2013},
  eprint    = {1308.3432},
  archivePrefix = {arXiv}
}"""

WILLIAMS_1992 = r"""@article{williams1992simple,
  author    = {Williams, Ronald J.},
  title     = {Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement Learning},
  journal   = {Machine Learning},
  volume    = {8},
  number    = {3--4},
  pages     = {229--256},
  year      = {1992}
}"""

SHAW_2018 = r"""@inproceedings{shaw2018self,
  author    = {Shaw, Peter and Uszkoreit, Jakob and Vaswani, Ashish},
  title     = {Self-Attention with Relative Position Representations},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for
               Computational Linguistics: Human Language Technologies, Volume 2 (Short Papers)},
  pages     = {464--468},
  year      = {2018}
}"""

PRESS_2022 = r"""@inproceedings{press2022train,
  author    = {Press, Ofir and Smith, Noah A. and Lewis, Mike},
  title     = {Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation},
  booktitle = {International Conference on Learning Representations},
  year      = {2022}
}"""

RAFFEL_2020 = r"""@article{raffel2020exploring,
  author    = {Raffel, Colin and Shazeer, Noam and Roberts, Adam and Lee, Katherine and Narang, Sharan and
               Matena, Michael and Zhou, Yanqi and Li, Wei and Liu, Peter J.},
  title     = {Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer},
  journal   = {Journal of Machine Learning Research},
  volume    = {21},
  number    = {140},
  pages     = {1--67},
  year      = {2020}
}"""

KAZEMNEJAD_2023 = r"""@inproceedings{kazemnejad2023impact,
  author    = {Kazemnejad, Amirhossein and Padhi, Inkit and Natesan Ramamurthy, Karthikeyan and Das, Payel and
               Reddy, Siva},
  title     = {The Impact of Positional Encoding on Length Generalization in Transformers},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {36},
  year      = {2023}
}"""

GEHRING_2017 = r"""@inproceedings{gehring2017convolutional,
  author    = {Gehring, Jonas and Auli, Michael and Grangier, David and Yarats, Denis and Dauphin, Yann N.},
  title     = {Convolutional Sequence to Sequence Learning},
  booktitle = {Proceedings of the 34th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {70},
  year      = {2017}
}"""
