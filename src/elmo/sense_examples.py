"""Polysemous words in sentences of known sense: the demo's three words and a larger set to measure how
often the contextual layers tell the senses apart.

Sentences are written here for this purpose (not taken from any corpus, so no model trained on them) as
tokens separated by spaces, English cased and tokenized as the `english` tokenizer splits it, Chinese
segmented by hand so that the word is one token (jieba would make "小米粥" one word).
"""

from dataclasses import dataclass

from elmo.polysemy import SenseSentence


@dataclass(frozen=True)
class SenseExample:
    word: str
    label: str  # the word as plot titles show it (Latin script: fonts for Chinese may be missing)
    language: str  # which shipped model reads it: "en" or "zh"
    sentences: tuple[SenseSentence, ...]  # grouped by sense


def _example(word: str, language: str, senses: dict[str, list[str]], label: str | None = None) -> SenseExample:
    """``senses``: sense -> sentences as space-separated tokens, the word one of them, once."""
    sentences = []
    for sense, texts in senses.items():
        for text in texts:
            tokens = tuple(text.split())
            if tokens.count(word) != 1:
                raise ValueError(f"{word!r} is {tokens.count(word)} tokens of {text!r}; expected exactly one")
            joined = " ".join(tokens) if language == "en" else "".join(tokens)
            sentences.append(SenseSentence(word, sense, joined, tokens, tokens.index(word)))
    return SenseExample(word, label or word, language, tuple(sentences))


DEMO_EXAMPLES = (
    _example("bank", "en", {
        "river": ["We sat on the bank of the river and watched the water .",
                  "The boat drifted toward the muddy bank of the stream .",
                  "Willows grow along the east bank of the lake ."],
        "money": ["She deposited the money at the bank on Monday .",
                  "The bank raised interest rates on its loans .",
                  "He borrowed ten thousand dollars from the bank to start a business ."],
    }),
    _example("play", "en", {
        "sport": ["The shortstop made a spectacular play on the grounder .",
                  "A late defensive play saved the game for the home team .",
                  "The quarterback was injured on the last play of the first half ."],
        "theatre": ["She was cast in a Broadway play by a famous playwright .",
                    "The actors rehearsed the new play before opening night .",
                    "Shakespeare wrote the play in 1599 for the Globe Theatre ."],
    }),
    _example("小米", "zh", {
        "millet": ["我 喜欢 吃 小米 粥", "农民 在 田里 种 小米 和 高粱", "早上 喝 一 碗 小米 稀饭 很 养胃"],
        "brand": ["小米 手机 很 好用", "小米 公司 发布 了 新 手机", "他 买 了 一 部 小米 手机"],
    }, label="xiaomi"),
)

POLYSEMY_EXAMPLES = (
    *DEMO_EXAMPLES,
    _example("bat", "en", {
        "animal": ["A bat flew out of the cave at dusk .", "The bat hunts insects at night using echoes ."],
        "baseball": ["He swung the bat and hit the ball over the fence .",
                     "The batter picked up a heavier bat for the next pitch ."],
    }),
    _example("bass", "en", {
        "fish": ["He caught a large bass in the lake this morning .", "The river is full of trout and bass ."],
        "music": ["She plays the bass in a jazz band .", "The bass and drums kept the rhythm of the song ."],
    }),
    _example("cell", "en", {
        "biology": ["Each cell of the body contains a nucleus .", "The virus enters the cell through its membrane ."],
        "prison": ["The prisoner was locked in his cell for the night .",
                   "Guards searched every cell of the jail for weapons ."],
    }),
    _example("court", "en", {
        "law": ["The court found him guilty of fraud .", "The judge ordered the court to adjourn until Monday ."],
        "sport": ["The players ran onto the tennis court .", "The basketball court was crowded with students ."],
    }),
    _example("crane", "en", {
        "bird": ["A white crane stood in the marsh looking for fish .", "The crane spread its wings and flew away ."],
        "machine": ["The crane lifted the steel beams onto the roof .",
                    "Workers used a crane to load the containers onto the ship ."],
    }),
    _example("plant", "en", {
        "vegetation": ["Water the plant every day and keep it in the sun .",
                       "This plant grows flowers in the spring ."],
        "factory": ["The company built a new power plant near the city .",
                    "Hundreds of workers lost their jobs when the steel plant closed ."],
    }),
    _example("spring", "en", {
        "season": ["The flowers bloom in the spring after the long winter .",
                   "We will travel to Paris in the spring of next year ."],
        "water": ["They drank cold water from a spring in the mountains .",
                  "The village was built around a natural hot spring ."],
    }),
    _example("organ", "en", {
        "body": ["The liver is the largest internal organ of the body .",
                 "Doctors waited for a donor organ for the transplant ."],
        "music": ["She played the organ at the church every Sunday .",
                  "The sound of the organ filled the cathedral ."],
    }),
    _example("seal", "en", {
        "animal": ["A seal was lying on the rocks near the shore .", "The seal dived into the icy water for fish ."],
        "stamp": ["The letter bore the royal seal of the king .",
                  "The document was signed and stamped with an official seal ."],
    }),
    _example("interest", "en", {
        "money": ["The bank pays interest on savings accounts .",
                  "The loan carries an interest rate of five percent ."],
        "attention": ["He showed great interest in modern art .",
                      "The children listened to the story with interest ."],
    }),
    _example("letter", "en", {
        "mail": ["She wrote a long letter to her mother .", "The letter arrived by post on Friday ."],
        "alphabet": ["The word begins with a capital letter .", "The letter A is the first of the alphabet ."],
    }),
    _example("star", "en", {
        "sky": ["The brightest star in the night sky is Sirius .", "The sun is a star at the centre of our system ."],
        "celebrity": ["The film star signed autographs for her fans .",
                      "He became a football star after the World Cup ."],
    }),
    _example("race", "en", {
        "contest": ["She won the race by two seconds .", "The horse finished third in the race ."],
        "people": ["The law forbids discrimination on the basis of race .",
                   "People of every race and religion live in the city ."],
    }),
    _example("capital", "en", {
        "city": ["Paris is the capital of France .", "The capital of the province is a small port town ."],
        "money": ["The company raised capital by selling shares .",
                  "Investors provided the capital needed to build the factory ."],
    }),
    _example("运动", "zh", {
        "sport": ["他 每天 早上 参加 体育 运动", "跑步 是 一 项 很 好 的 运动"],
        "movement": ["五四 运动 是 中国 历史 上 的 重要 事件", "这 场 政治 运动 影响 了 很多 人"],
    }, label="yundong"),
    _example("花", "zh", {
        "flower": ["春天 公园 里 的 花 都 开 了", "她 在 窗台 上 种 了 一 盆 花"],
        "spend": ["他 花 了 很多 钱 买 房子", "这 项 工程 花 了 三 年 时间"],
    }, label="hua"),
    _example("东西", "zh", {
        "thing": ["我 去 商店 买 东西", "他 把 东西 放在 桌子 上"],
        "east-west": ["这 条 大街 东西 长 五 公里", "铁路 横贯 东西 连接 两 个 省"],
    }, label="dongxi"),
    _example("包袱", "zh", {
        "bundle": ["他 背着 一 个 大 包袱 走 进 村子", "她 把 衣服 打 成 一 个 包袱"],
        "burden": ["我们 要 放下 思想 包袱 大胆 改革", "国有 企业 的 债务 包袱 很 重"],
    }, label="baofu"),
    _example("窗口", "zh", {
        "window": ["他 打开 窗口 看 外面 的 风景", "阳光 从 窗口 照 进 房间"],
        "gateway": ["深圳 是 中国 对外开放 的 窗口", "这个 口岸 成为 对外 贸易 的 重要 窗口"],
    }, label="chuangkou"),
    _example("门", "zh", {
        "door": ["他 推开 门 走 了 进来", "请 把 门 关 上"],
        "course": ["这 学期 他 选 了 五 门 课", "数学 是 一 门 重要 的 学科"],
    }, label="men"),
    _example("生气", "zh", {
        "angry": ["听 了 这 话 他 很 生气", "妈妈 因为 孩子 撒谎 而 生气"],
        "vitality": ["春天 的 田野 充满 生气", "改革 给 这 座 城市 带来 了 新 的 生气"],
    }, label="shengqi"),
    _example("水分", "zh", {
        "water": ["西瓜 含有 大量 水分", "植物 通过 根部 吸收 水分"],
        "inflated": ["这些 统计 数字 有 很 大 的 水分", "要 挤掉 产值 中 的 水分"],
    }, label="shuifen"),
)
