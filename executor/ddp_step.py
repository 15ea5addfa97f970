"""(being written)"""
def add_arguments(p):
    pass
def run(rt, args):
    raise NotImplementedError
