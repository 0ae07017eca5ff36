"""Other runtimes: an ELMo model as a graph they run without PyTorch (`elmo-transformers export`)."""
