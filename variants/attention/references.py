"""BibTeX entries of the papers behind the kernelised attention types and grouped key/value heads."""

KATHAROPOULOS_2020 = """@inproceedings{katharopoulos2020transformers,
  title     = {Transformers are {RNNs}: Fast Autoregressive Transformers with Linear Attention},
  author    = {Katharopoulos, Angelos and Vyas, Apoorv and Pappas, Nikolaos and Fleuret, Fran{\\c{c}}ois},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning (ICML)},
  series    = {Proceedings of Machine Learning Research},
  volume    = {119},
  pages     = {5156--5165},
  year      = {2020}
}"""

CHOROMANSKI_2021 = """@inproceedings{choromanski2021rethinking,
  title     = {Rethinking Attention with Performers},
  author    = {Choromanski, Krzysztof Marcin and Likhosherstov, Valerii and Dohan, David and Song, Xingyou
               and Gane, Andreea and Sarlos, Tamas and Hawkins, Peter and Davis, Jared Quincy
               and Mohiuddin, Afroz and Kaiser, Lukasz and Belanger, David Benjamin
               and Colwell, Lucy J. and Weller, Adrian},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2021}
}"""

AINSLIE_2023 = """@inproceedings{ainslie2023gqa,
  title     = {{GQA}: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints},
  author    = {Ainslie, Joshua and Lee-Thorp, James and de Jong, Michiel and Zemlyanskiy, Yury
               and Lebr{\\'o}n, Federico and Sanghai, Sumit},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  pages     = {4895--4901},
  year      = {2023}
}"""

SHAZEER_2019 = """@article{shazeer2019fast,
  title   = {Fast Transformer Decoding: One Write-Head is All You Need},
  author  = {Shazeer, Noam},
  journal = {arXiv preprint arXiv:1911.02150},
  year    = {2019}
}"""
