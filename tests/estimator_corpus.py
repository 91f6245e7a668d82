# ruff: noqa: RUF001, ISC004 - text in other scripts; sentences split over lines in the tuples
"""A seeded corpus of texts by class, to measure a token estimator against a real tokenizer.

``corpus(seed, per_class)`` returns ``(class, text)`` pairs: ``per_class`` texts of each class in
``CLASSES``, of varied lengths (most between 200 and 3 000 cl100k tokens), built from
hand-written fragments recombined by a seeded ``random.Random`` — the same seed, the same corpus.
The unit tests tune nothing: they check the estimator on seeds the rules were not tuned on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["CLASSES", "corpus", "sample"]

_PROSE = (
    "The committee met on Tuesday to review the proposal, and after a long discussion it decided "
    "to postpone the vote until the next quarter.",
    "Most of the cost comes from the storage layer, which has to keep every version of a document "
    "for at least seven years.",
    "She opened the window, looked at the rain for a while, and then went back to her desk.",
    "In 1879, the city built its first water treatment plant; by 1910 the population had tripled.",
    "If the request fails, the client waits a few seconds and retries, doubling the delay each "
    "time up to a limit of one minute.",
    "Researchers found that participants who slept less than six hours were significantly more "
    "likely to report symptoms of anxiety.",
    "The river winds through the valley for nearly forty kilometres before it reaches the sea.",
    "Our quarterly revenue grew by 12%, driven mainly by subscriptions in Europe and Asia.",
    "He argued that the theory, although elegant, did not explain the experimental results "
    "observed in the laboratory.",
    "Please make sure that all participants have signed the consent form before the session "
    "starts.",
    "Unfortunately, the train was delayed by almost two hours because of a signal failure near "
    "the station.",
    "The museum's new exhibition features paintings, sculptures and photographs from the early "
    "twentieth century.",
    "Customers can return any product within thirty days, provided it is unused and in its "
    "original packaging.",
    "It's not clear whether the policy will survive the next election, but most analysts think "
    "it won't.",
    "Photosynthesis converts light energy into chemical energy, releasing oxygen as a by-product.",
    "The software engineer refactored the authentication module to reduce its dependencies on "
    "legacy infrastructure.",
    "During the winter months, temperatures in the northern provinces regularly drop below minus "
    "twenty degrees.",
    "A well-designed interface lets users accomplish their goals without reading the manual.",
    "The negotiations collapsed when neither side was willing to compromise on the question of "
    "fishing rights.",
    "Although the recipe calls for fresh basil, dried oregano works surprisingly well as a "
    "substitute.",
    "Thousands of volunteers helped clean the beaches after the oil spill, collecting more than "
    "300 tonnes of waste.",
    "The author's second novel, published in 2015, explores themes of memory, exile and belonging.",
    "Our support team is available Monday through Friday, from 9 a.m. to 6 p.m. Eastern Time.",
    "What would happen, he wondered, if everyone simply stopped paying attention to the news?",
)

_CODE = (
    # Python
    '''def load_config(path: str) -> dict[str, Any]:
    """Read the configuration file and return its settings."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if "version" not in data:
        raise ValueError(f"missing version in {path}")
    return {key.lower(): value for key, value in data.items()}
''',
    """class UserRepository:
    def __init__(self, session):
        self._session = session
        self._cache = {}

    def get_by_id(self, user_id: int) -> User | None:
        if user_id in self._cache:
            return self._cache[user_id]
        user = self._session.query(User).filter(User.id == user_id).first()
        self._cache[user_id] = user
        return user
""",
    # JavaScript / TypeScript
    """export async function fetchOrders(customerId, { limit = 20, offset = 0 } = {}) {
  const url = `/api/customers/${customerId}/orders?limit=${limit}&offset=${offset}`;
  const response = await fetch(url);
  if (!response.ok) {
    throw new Error(`Request failed with status ${response.status}`);
  }
  const payload = await response.json();
  return payload.items.map((item) => ({ ...item, total: item.price * item.quantity }));
}
""",
    """interface CartItem {
  sku: string;
  quantity: number;
  unitPrice: number;
}

const computeTotal = (items: CartItem[]): number =>
  items.reduce((sum, item) => sum + item.quantity * item.unitPrice, 0);
""",
    # Go
    """func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}
""",
    # Rust
    """impl Parser {
    pub fn parse_line(&mut self, line: &str) -> Result<Entry, ParseError> {
        let mut parts = line.splitn(3, ' ');
        let level = parts.next().ok_or(ParseError::Empty)?;
        let timestamp: u64 = parts.next().ok_or(ParseError::MissingTime)?.parse()?;
        Ok(Entry { level: level.to_string(), timestamp, message: parts.collect() })
    }
}
""",
    # SQL
    """SELECT c.id, c.name, COUNT(o.id) AS order_count, SUM(o.total) AS revenue
FROM customers AS c
LEFT JOIN orders AS o ON o.customer_id = c.id AND o.created_at >= '2024-01-01'
WHERE c.country IN ('DE', 'FR', 'IT')
GROUP BY c.id, c.name
HAVING COUNT(o.id) > 5
ORDER BY revenue DESC
LIMIT 50;
""",
    # Java
    """public final class RetryPolicy {
    private final int maxAttempts;
    private final Duration backoff;

    public RetryPolicy(int maxAttempts, Duration backoff) {
        if (maxAttempts < 1) {
            throw new IllegalArgumentException("maxAttempts must be positive");
        }
        this.maxAttempts = maxAttempts;
        this.backoff = Objects.requireNonNull(backoff);
    }
}
""",
    # C
    """static int read_header(FILE *fp, struct header *out)
{
    unsigned char buf[16];
    if (fread(buf, 1, sizeof buf, fp) != sizeof buf)
        return -1;
    out->magic = (buf[0] << 24) | (buf[1] << 16) | (buf[2] << 8) | buf[3];
    out->length = le32toh(*(uint32_t *)(buf + 4));
    return out->magic == 0x7f454c46 ? 0 : -2;
}
""",
    # Shell
    """#!/usr/bin/env bash
set -euo pipefail
for file in "$@"; do
  if [[ -f "$file" ]]; then
    sha256sum "$file" >> checksums.txt
  else
    echo "skipping $file: not a regular file" >&2
  fi
done
""",
)

_NAMES = ("Alice", "Bob", "Chen Wei", "Dmitri", "Fatima", "Ravi", "Sofia", "Yuki", "Olga", "Omar")
_WORDS = [
    "status",
    "active",
    "pending",
    "error",
    "order",
    "invoice",
    "customer",
    "product",
    "shipping",
    "address",
    "payment",
    "method",
    "total",
    "amount",
    "currency",
    "description",
    "created",
    "updated",
    "deleted",
    "enabled",
    "priority",
    "region",
    "zone",
    "quantity",
    "price",
    "discount",
    "category",
    "label",
    "owner",
    "message",
    "result",
    "items",
    "metadata",
    "version",
]

_CHINESE = (
    "今天的会议主要讨论了明年的预算安排，大家对研发投入的比例存在不同意见。",
    "这个函数在处理空列表时会抛出异常，需要在调用之前先检查输入是否为空。",
    "随着城市化进程的加快，越来越多的年轻人选择离开家乡，到大城市寻找工作机会。",
    "请在周五之前提交项目报告，并附上详细的数据分析和测试结果。",
    "我们的客户服务团队每天工作十二个小时，为用户解答各种问题。",
    "北京的秋天天气晴朗，气温适中，是旅游的最佳季节。",
    "研究人员发现，长期缺乏睡眠会显著影响人的记忆力和注意力。",
    "系统升级后，数据库的查询速度提高了大约百分之三十。",
    "他一边喝着茶，一边翻看着桌上的旧照片，想起了很多年前的事情。",
    "根据最新的统计数据，该地区的人口在过去十年中增长了将近两倍。",
    "如果订单在二十四小时内没有付款，系统会自动取消该订单。",
    "这本小说讲述了一个普通家庭在战争年代的悲欢离合。",
    "为了保护环境，政府鼓励市民使用公共交通工具出行。",
    "服务器日志显示，错误发生在凌晨三点左右，原因是磁盘空间不足。",
)

_JAPANESE = (
    "本日の会議では、来年度の予算について詳しく話し合いました。",
    "この関数は空のリストを受け取ると例外を投げるので、呼び出す前に確認してください。",
    "東京の春は桜がとても美しく、多くの観光客が公園を訪れます。",
    "ご注文の商品は三日以内に発送される予定です。しばらくお待ちください。",
    "研究チームは、新しい材料が従来のものより二倍も強いことを発見しました。",
    "彼は駅まで走ったが、電車はもう出発してしまっていた。",
    "サーバーのログによると、エラーは午前三時ごろに発生しました。",
    "データベースの設定を変更した後、アプリケーションを再起動する必要があります。",
    "私たちのサポートチームは、月曜日から金曜日までご質問にお答えします。",
    "この小説は、戦争の時代を生きた家族の物語を描いています。",
    "環境を守るために、できるだけ公共交通機関を利用しましょう。",
    "ユーザー名またはパスワードが正しくありません。もう一度入力してください。",
)

_KOREAN = (
    "오늘 회의에서는 내년 예산 계획에 대해 자세히 논의했습니다.",
    "이 함수는 빈 목록을 받으면 예외를 발생시키므로 호출하기 전에 확인해야 합니다.",
    "서울의 가을은 날씨가 맑고 선선해서 여행하기에 가장 좋은 계절입니다.",
    "주문하신 상품은 삼 일 이내에 발송될 예정입니다. 잠시만 기다려 주세요.",
    "연구진은 수면 부족이 기억력과 집중력에 큰 영향을 미친다는 사실을 발견했습니다.",
    "그는 역까지 뛰어갔지만 기차는 이미 떠나 버렸다.",
    "서버 로그에 따르면 오류는 새벽 세 시쯤 디스크 공간 부족으로 발생했습니다.",
    "데이터베이스 설정을 변경한 후에는 애플리케이션을 다시 시작해야 합니다.",
    "고객 지원팀은 월요일부터 금요일까지 여러분의 질문에 답변해 드립니다.",
    "환경을 보호하기 위해 가능한 한 대중교통을 이용합시다.",
    "사용자 이름 또는 비밀번호가 올바르지 않습니다. 다시 입력해 주세요.",
)

_RUSSIAN = (
    "На сегодняшнем совещании мы подробно обсудили бюджет на следующий год.",
    "Эта функция выбрасывает исключение при пустом списке, поэтому проверьте входные данные.",
    "Осенью в Москве часто идут дожди, но иногда выдаются тёплые солнечные дни.",
    "Ваш заказ будет отправлен в течение трёх рабочих дней. Спасибо за покупку!",
    "Исследователи обнаружили, что недостаток сна значительно ухудшает память и внимание.",
    "Он добежал до станции, но поезд уже ушёл, и ему пришлось ждать следующего.",
    "Согласно журналу сервера, ошибка произошла около трёх часов ночи из-за нехватки места.",
    "После изменения настроек базы данных необходимо перезапустить приложение.",
    "Наша служба поддержки работает с понедельника по пятницу с девяти до шести.",
    "Этот роман рассказывает историю обычной семьи в годы войны.",
    "Чтобы защитить окружающую среду, старайтесь пользоваться общественным транспортом.",
    "Неверное имя пользователя или пароль. Пожалуйста, попробуйте ещё раз.",
)

_ARABIC = (
    "ناقشنا في اجتماع اليوم ميزانية العام المقبل بالتفصيل.",
    "هذه الدالة تطلق استثناء عند استلام قائمة فارغة، لذا يجب التحقق من المدخلات أولا.",
    "الطقس في الخريف معتدل وجميل، وهو أفضل وقت للسفر والسياحة.",
    "سيتم شحن طلبك خلال ثلاثة أيام عمل. شكرا لتسوقك معنا!",
    "اكتشف الباحثون أن قلة النوم تؤثر بشكل كبير على الذاكرة والتركيز.",
    "ركض إلى المحطة، لكن القطار كان قد غادر بالفعل.",
    "وفقا لسجلات الخادم، حدث الخطأ حوالي الساعة الثالثة صباحا بسبب نقص المساحة.",
    "بعد تغيير إعدادات قاعدة البيانات، يجب إعادة تشغيل التطبيق.",
    "فريق الدعم لدينا متاح من الاثنين إلى الجمعة للإجابة على أسئلتكم.",
    "تحكي هذه الرواية قصة عائلة عادية عاشت في زمن الحرب.",
    "اسم المستخدم أو كلمة المرور غير صحيحة. يرجى المحاولة مرة أخرى.",
)

_HINDI = (
    "आज की बैठक में हमने अगले साल के बजट पर विस्तार से चर्चा की।",
    "यह फ़ंक्शन खाली सूची मिलने पर त्रुटि देता है, इसलिए पहले इनपुट की जाँच करें।",
    "शरद ऋतु में मौसम सुहावना होता है और यह घूमने के लिए सबसे अच्छा समय है।",
    "आपका ऑर्डर तीन कार्यदिवसों के भीतर भेज दिया जाएगा। खरीदारी के लिए धन्यवाद!",
    "शोधकर्ताओं ने पाया कि नींद की कमी याददाश्त और ध्यान पर बुरा असर डालती है।",
    "वह स्टेशन तक दौड़ा, लेकिन ट्रेन पहले ही जा चुकी थी।",
    "सर्वर लॉग के अनुसार, त्रुटि रात लगभग तीन बजे डिस्क में जगह की कमी के कारण हुई।",
    "डेटाबेस की सेटिंग बदलने के बाद एप्लिकेशन को फिर से शुरू करना होगा।",
    "हमारी सहायता टीम सोमवार से शुक्रवार तक आपके सवालों के जवाब देती है।",
    "यह उपन्यास युद्ध के समय में रहने वाले एक साधारण परिवार की कहानी कहता है।",
    "उपयोगकर्ता नाम या पासवर्ड गलत है। कृपया फिर से प्रयास करें।",
)

_EMOJI = "😀😂🤣😊😍🥰😎🤔😅😭😡👍👎👏🙏🔥✨🎉💯❤️💔🚀🌟🍕☕🐶🐱🌈⚡✅❌🤯🥳😴🙈💪👀"
_CHAT = (
    "omg did you see that",
    "lol that's hilarious",
    "can't wait for the weekend",
    "thanks so much!!",
    "sounds good to me",
    "happy birthday",
    "just landed, see you soon",
    "this is the best pizza ever",
    "ugh monday again",
    "we won the game",
    "miss you guys",
    "ok ok I'll do it",
)

_LOG_MESSAGES = (
    "request completed",
    "connection refused by upstream",
    "cache miss for key",
    "retrying after timeout",
    "user logged in",
    "payment authorized",
    "slow query detected",
    "worker started",
    "health check failed",
    "disk usage above threshold",
)

_HOSTS = ("api.example.com", "cdn.example.org", "github.com", "docs.python.org", "s3.amazonaws.com")
_SEGMENTS = [
    "src",
    "users",
    "orders",
    "v1",
    "v2",
    "api",
    "static",
    "images",
    "docs",
    "reference",
    "assets",
    "build",
    "releases",
    "download",
    "config",
    "tests",
    "fixtures",
    "data",
    "reports",
    "2024",
    "archive",
    "internal",
]

# Hebrew and Greek, written for this corpus.
_HEBREW = (
    "הפגישה של היום עסקה בתקציב של השנה הבאה ובחלוקת המשאבים בין הצוותים.",
    "הפונקציה זורקת חריגה כאשר הרשימה ריקה, ולכן יש לבדוק את הקלט לפני הקריאה.",
    "בסתיו מזג האוויר נעים, וזו העונה הטובה ביותר לטייל בצפון הארץ.",
    "ההזמנה שלך תישלח בתוך שלושה ימי עבודה. תודה שקנית אצלנו!",
    "החוקרים מצאו שמחסור בשינה פוגע בזיכרון וביכולת הריכוז.",
    "הוא רץ עד התחנה, אבל הרכבת כבר יצאה והוא נאלץ לחכות לבאה.",
    "לפי יומן השרת, השגיאה התרחשה בסביבות שלוש לפנות בוקר בגלל חוסר במקום בדיסק.",
    "אחרי שינוי ההגדרות של מסד הנתונים צריך להפעיל מחדש את היישום.",
    "צוות התמיכה שלנו זמין מיום ראשון עד יום חמישי, משמונה בבוקר עד שש בערב.",
    "שם המשתמש או הסיסמה אינם נכונים. נא לנסות שוב.",
    "הספר מספר על משפחה רגילה שחיה בעיר קטנה ליד הים.",
)

_GREEK = (
    "Στη σημερινή συνάντηση συζητήσαμε αναλυτικά τον προϋπολογισμό του επόμενου έτους.",
    "Η συνάρτηση πετάει εξαίρεση όταν η λίστα είναι κενή, γι' αυτό ελέγξτε πρώτα την είσοδο.",
    "Το φθινόπωρο ο καιρός είναι ήπιος και είναι η καλύτερη εποχή για ταξίδια.",
    "Η παραγγελία σας θα αποσταλεί μέσα σε τρεις εργάσιμες ημέρες. Ευχαριστούμε!",
    "Οι ερευνητές βρήκαν ότι η έλλειψη ύπνου επηρεάζει τη μνήμη και την προσοχή.",
    "Έτρεξε μέχρι τον σταθμό, αλλά το τρένο είχε ήδη φύγει.",
    "Σύμφωνα με το αρχείο καταγραφής, το σφάλμα συνέβη γύρω στις τρεις τα ξημερώματα.",
    "Μετά την αλλαγή των ρυθμίσεων της βάσης δεδομένων, επανεκκινήστε την εφαρμογή.",
    "Η ομάδα υποστήριξης είναι διαθέσιμη από Δευτέρα έως Παρασκευή.",
    "Λανθασμένο όνομα χρήστη ή κωδικός πρόσβασης. Προσπαθήστε ξανά.",
    "Το μυθιστόρημα αφηγείται την ιστορία μιας οικογένειας σε ένα μικρό νησί.",
)

_FILE_EXTENSIONS = ("py", "rs", "ts", "json", "md", "toml", "lock", "yaml", "txt", "sh", "c", "h")
_CRATES = (
    "serde",
    "serde_json",
    "tokio",
    "anyhow",
    "thiserror",
    "clap",
    "regex",
    "log",
    "rand",
    "bytes",
    "futures",
    "hyper",
    "tracing",
    "syn",
    "quote",
    "proc-macro2",
    "itertools",
    "libc",
)
_BOX_STYLES = (  # horizontal, vertical, then the corners and joints in reading order
    ("─", "│", "┌┬┐├┼┤└┴┘"),
    ("━", "┃", "┏┳┓┣╋┫┗┻┛"),
    ("═", "║", "╔╦╗╠╬╣╚╩╝"),
    ("─", "│", "╭┬╮├┼┤╰┴╯"),
    ("-", "|", "+++++++++"),
)
_SYMBOLS = "→←↑↓⇒•·●○◆■□▪▶►✓✔✗✘★☆…–—"
_SPINNERS = ("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", "⣾⣽⣻⢿⡿⣟⣯⣷", "◐◓◑◒", "▁▂▃▄▅▆▇█", "|/-\\")
_BAR_FILL = ("█░", "▓░", "█▒", "■□", "⣿⣀", "━ ", "=-", "#.", "●○")
_RUN_CHARS = "x=-#  \n\n0*~_.XaAz+!|"
_LATEX = (
    r"\frac{a}{b}",
    r"\sum_{i=1}^{n} x_i^2",
    r"\int_0^\infty e^{-x^2}\,dx",
    r"\sqrt{2\pi}",
    r"\alpha + \beta \leq \gamma",
    r"\mathbb{E}[X]",
    r"\lim_{n \to \infty}",
    r"\nabla f(x)",
    r"\partial_t u = \Delta u",
    r"\binom{n}{k}",
    r"\left( \frac{1}{2} \right)^{k}",
    r"\mathcal{O}(n \log n)",
    r"\forall \epsilon > 0",
    r"\hat{\theta}",
    r"\|x - y\|_2",
)
_UNICODE_MATH = (
    "∀ε>0 ∃δ>0",
    "|x−a|<δ ⇒ |f(x)−f(a)|<ε",
    "∑ᵢ xᵢ²",
    "∫₀^∞ e^{−x²} dx = √π/2",
    "A ⊆ B ∪ C",
    "x ∈ ℝⁿ",
    "∇·F = ∂ρ/∂t",
    "α ≤ β ≠ γ",
    "P(A ∩ B) ≈ 0.25",
    "n! ≥ 2ⁿ⁻¹",
    "∏ₖ (1 − pₖ)",
    "f: ℕ → ℤ",
    "¬(p ∧ q) ≡ ¬p ∨ ¬q",
    "λx. x × x",
    "±∞",
    "θ̂ = argmax L(θ)",
)


def _repeat(target: int, piece: Callable[[], str], sep: str) -> str:
    """Join pieces from ``piece()`` with ``sep`` until the text is about ``target`` characters."""
    parts: list[str] = []
    size = 0
    while size < target:
        part = piece()
        parts.append(part)
        size += len(part) + len(sep)
    return sep.join(parts)


def _prose(rng: random.Random, chars: int) -> str:
    def paragraph() -> str:
        return " ".join(rng.choice(_PROSE) for _ in range(rng.randint(2, 6)))

    return _repeat(chars, paragraph, "\n\n")


def _code(rng: random.Random, chars: int) -> str:
    return _repeat(chars, lambda: rng.choice(_CODE), "\n")


def _record(rng: random.Random) -> dict[str, object]:
    record: dict[str, object] = {
        "id": rng.randint(1, 10**6),
        "name": rng.choice(_NAMES),
        "email": f"{rng.choice(_NAMES).split()[0].lower()}{rng.randint(1, 999)}@example.com",
        rng.choice(_WORDS): rng.choice(_WORDS),
        "amount": round(rng.uniform(0, 5000), 2),
        "active": rng.random() < 0.5,
        "created_at": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
        "tags": rng.sample(_WORDS, rng.randint(0, 4)),
    }
    if rng.random() < 0.5:
        record["address"] = {
            "street": f"{rng.randint(1, 300)} {rng.choice(_WORDS).title()} Street",
            "city": rng.choice(("Berlin", "Paris", "Austin", "Tokyo", "Lagos", "Lima")),
            "zip": f"{rng.randint(10000, 99999)}",
        }
    if rng.random() < 0.3:
        record["note"] = rng.choice(_PROSE)
    if rng.random() < 0.3:
        record["id"] = hashlib.md5(str(rng.random()).encode()).hexdigest()[:12]  # noqa: S324
    return record


def _measurement(rng: random.Random) -> dict[str, object]:
    return {
        "ts": rng.randint(1_600_000_000, 1_800_000_000),
        "sensor": f"s-{rng.randint(1, 64)}",
        "v": [round(rng.gauss(20, 5), rng.randint(1, 4)) for _ in range(rng.randint(1, 6))],
        "ok": rng.random() < 0.9,
        "err": None if rng.random() < 0.8 else rng.choice(_LOG_MESSAGES),
    }


def _tool_result(rng: random.Random) -> dict[str, object]:
    return {
        "type": rng.choice(("file", "dir", "symlink")),
        "path": "/".join(rng.choice(_SEGMENTS) for _ in range(rng.randint(1, 4))),
        "size": rng.randint(0, 10**7),
        "mode": f"0o{rng.randint(0, 511):o}",
        "sha": rng.randbytes(8).hex(),
        "uuid": "-".join(rng.randbytes(n).hex() for n in (4, 2, 2, 2, 6)),
    }


def _json(rng: random.Random, chars: int, *, pretty: bool) -> str:
    records: list[dict[str, object]] = []
    make = rng.choice((_record, _measurement, _tool_result))
    while len(json.dumps(records)) < chars:
        records.append(make(rng))
    payload: object = {"items": records, "total": len(records)} if rng.random() < 0.5 else records
    if pretty:
        return json.dumps(payload, indent=rng.choice((2, 4)), ensure_ascii=False)
    separators = (",", ":") if rng.random() < 0.5 else (", ", ": ")
    return json.dumps(payload, separators=separators, ensure_ascii=False)


def _script(fragments: tuple[str, ...], sep: str) -> Callable[[random.Random, int], str]:
    def make(rng: random.Random, chars: int) -> str:
        def paragraph() -> str:
            return sep.join(rng.choice(fragments) for _ in range(rng.randint(2, 5)))

        return _repeat(chars, paragraph, "\n")

    return make


def _emoji_chat(rng: random.Random, chars: int) -> str:
    def line() -> str:
        burst = "".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 10)))
        words = rng.choice(_CHAT)
        spaced = rng.random() < 0.5
        return f"{rng.choice(_NAMES)}: {words}{' ' if spaced else ''}{burst}"

    return _repeat(chars, line, "\n")


def _base64(rng: random.Random, chars: int) -> str:
    raw = rng.randbytes(chars * 3 // 4)
    text = base64.b64encode(raw).decode("ascii")
    if rng.random() < 0.5:  # wrapped as in PEM or MIME
        text = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    return text


def _hex(rng: random.Random, chars: int) -> str:
    def line() -> str:
        digest = rng.randbytes(rng.choice((16, 20, 32))).hex()
        kind = rng.random()
        if kind < 0.3:
            return f"{digest}  {rng.choice(_SEGMENTS)}/{rng.choice(_SEGMENTS)}.tar.gz"
        if kind < 0.5:
            return f"commit {rng.randbytes(20).hex()}"
        return digest

    return _repeat(chars, line, "\n")


def _numbers(rng: random.Random, chars: int) -> str:
    columns = rng.randint(3, 8)
    header = ",".join(rng.sample(_WORDS, columns))

    def row() -> str:
        cells = []
        for _ in range(columns):
            kind = rng.random()
            if kind < 0.4:
                cells.append(str(rng.randint(0, 10 ** rng.randint(1, 7))))
            elif kind < 0.8:
                cells.append(f"{rng.uniform(-1000, 1000):.{rng.randint(1, 4)}f}")
            else:
                cells.append(f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        return ",".join(cells)

    return header + "\n" + _repeat(chars, row, "\n")


def _logs(rng: random.Random, chars: int) -> str:
    def line() -> str:
        stamp = (
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
        )
        level = rng.choice(("INFO", "WARN", "ERROR", "DEBUG"))
        if rng.random() < 0.5:
            fields = (
                f"request_id={rng.randbytes(8).hex()} user={rng.randint(1, 99999)} "
                f"latency_ms={rng.randint(1, 4000)} path=/{rng.choice(_SEGMENTS)}/"
                f"{rng.randint(1, 999)}"
            )
            return f"{stamp} {level} [{rng.choice(_WORDS)}] {rng.choice(_LOG_MESSAGES)} {fields}"
        ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        return (
            f"{ip} - - [{rng.randint(1, 28):02d}/Mar/2024:{rng.randint(0, 23):02d}:"
            f'{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0000] "GET '
            f'/{rng.choice(_SEGMENTS)}/{rng.randint(1, 9999)} HTTP/1.1" '
            f"{rng.choice((200, 200, 304, 404, 500))} "
            f"{rng.randint(100, 99999)} {rng.random():.3f}"
        )

    return _repeat(chars, line, "\n")


def _urls(rng: random.Random, chars: int) -> str:
    def item() -> str:
        path = "/".join(rng.choice(_SEGMENTS) for _ in range(rng.randint(1, 5)))
        kind = rng.random()
        if kind < 0.4:
            query = f"?id={rng.randint(1, 10**6)}&sort={rng.choice(_WORDS)}"
            return f"https://{rng.choice(_HOSTS)}/{path}{query if rng.random() < 0.5 else ''}"
        if kind < 0.7:
            ext = rng.choice(("py", "ts", "json", "md", "log", "png"))
            return f"/home/{rng.choice(_NAMES).split()[0].lower()}/projects/{path}.{ext}"
        return f"C:\\Users\\{rng.choice(_NAMES).split()[0]}\\{path.replace('/', chr(92))}.txt"

    return _repeat(chars, item, "\n")


def _markdown(rng: random.Random, chars: int) -> str:
    def block() -> str:
        kind = rng.random()
        if kind < 0.2:
            return f"## {rng.choice(_PROSE)[:40].strip()}"
        if kind < 0.45:
            return "\n".join(f"- {rng.choice(_PROSE)}" for _ in range(rng.randint(2, 4)))
        if kind < 0.6:
            return f"```python\n{rng.choice(_CODE[:2])}```"
        if kind < 0.75:
            rows = [f"| {w} | {rng.randint(1, 999)} | `{rng.choice(_WORDS)}` |" for w in _WORDS[:3]]
            return "| name | count | key |\n| --- | --- | --- |\n" + "\n".join(rows)
        return f"{rng.choice(_PROSE)} See **[the docs](https://{rng.choice(_HOSTS)}/x)** for more."

    return _repeat(chars, block, "\n\n")


def _name(rng: random.Random) -> str:
    word = rng.choice((*_WORDS, *_SEGMENTS))
    return word if rng.random() < 0.3 else f"{word}.{rng.choice(_FILE_EXTENSIONS)}"


def _tree(rng: random.Random, chars: int) -> str:
    ascii_only = rng.random() < 0.2
    tee, last, bar = ("|-- ", "`-- ", "|   ") if ascii_only else ("├── ", "└── ", "│   ")
    lines = [rng.choice((".", "src", f"/home/{rng.choice(_NAMES).split()[0].lower()}/project"))]
    size = 0
    dirs = files = 0

    def walk(prefix: str, depth: int) -> None:
        nonlocal size, dirs, files
        count = rng.randint(1, 6)
        for index in range(count):
            if size >= chars:
                return
            end = index == count - 1
            is_dir = depth < 5 and rng.random() < 0.35
            name = rng.choice(_SEGMENTS) if is_dir else _name(rng)
            if rng.random() < 0.2:
                name = f"[{rng.randint(1, 99999):>6}]  {name}"
            line = f"{prefix}{last if end else tee}{name}"
            lines.append(line)
            size += len(line) + 1
            if is_dir:
                dirs += 1
                walk(prefix + ("    " if end else bar), depth + 1)
            else:
                files += 1

    while size < chars:
        walk("", 0)
    lines.append(f"\n{dirs} directories, {files} files")
    return "\n".join(lines)


def _cargo_tree(rng: random.Random, chars: int) -> str:
    root = rng.choice(_WORDS)
    lines = [f"{root} v0.{rng.randint(1, 9)}.0 (/home/dev/{root})"]
    size = 0

    def version() -> str:
        return f"v{rng.randint(0, 3)}.{rng.randint(0, 60)}.{rng.randint(0, 200)}"

    def walk(prefix: str, depth: int) -> None:
        nonlocal size
        count = rng.randint(1, 5)
        for index in range(count):
            if size >= chars:
                return
            end = index == count - 1
            crate = rng.choice(_CRATES) if rng.random() < 0.6 else f"{rng.choice(_WORDS)}-core"
            extra = rng.choice(("", "", "", " (*)", " (proc-macro)", f" (/src/{crate})"))
            line = f"{prefix}{'└── ' if end else '├── '}{crate} {version()}{extra}"
            lines.append(line)
            size += len(line) + 1
            if depth < 6 and not extra and rng.random() < 0.4:
                walk(prefix + ("    " if end else "│   "), depth + 1)

    while size < chars:
        if rng.random() < 0.2:
            lines.append(rng.choice(("[dev-dependencies]", "[build-dependencies]")))
        walk("", 0)
    return "\n".join(lines)


def _box_table(rng: random.Random, chars: int) -> str:
    horizontal, vertical, joints = rng.choice(_BOX_STYLES)
    columns = rng.randint(2, 6)
    header = rng.sample(_WORDS, columns)
    widths = [max(len(word), 6) + rng.randint(0, 8) for word in header]

    def rule(left: str, middle: str, right: str) -> str:
        return left + middle.join(horizontal * (width + 2) for width in widths) + right

    def row(cells: list[str]) -> str:
        padded = (f" {cell[:width]:<{width}} " for cell, width in zip(cells, widths, strict=True))
        return vertical + vertical.join(padded) + vertical

    def cell() -> str:
        kind = rng.random()
        if kind < 0.4:
            return rng.choice((*_WORDS, *_NAMES))
        if kind < 0.7:
            return str(rng.randint(0, 10**6))
        return f"{rng.uniform(0, 100):.2f}"

    lines = [rule(*joints[0:3]), row(header), rule(*joints[3:6])]
    size = sum(map(len, lines))
    while size < chars:
        line = row([cell() for _ in widths])
        lines.append(line)
        size += len(line) + 1
        if rng.random() < 0.1:
            lines.append(rule(*joints[3:6]))
    lines.append(rule(*joints[6:9]))
    return "\n".join(lines)


def _math(rng: random.Random, chars: int) -> str:
    def line() -> str:
        kind = rng.random()
        if kind < 0.45:
            parts = " ".join(rng.choice(_LATEX) for _ in range(rng.randint(1, 4)))
            return f"$${parts}$$" if rng.random() < 0.5 else f"where ${parts}$ holds"
        if kind < 0.9:
            return " ".join(rng.choice(_UNICODE_MATH) for _ in range(rng.randint(1, 4)))
        return rng.choice(_PROSE)

    return _repeat(chars, line, "\n")


def _symbol_runs(rng: random.Random, chars: int) -> str:
    def line() -> str:
        kind = rng.random()
        if kind < 0.35:  # a progress bar
            pair = rng.choice(_BAR_FILL)
            fill, empty = pair[0], pair[1]
            width = rng.choice((10, 20, 30, 40, 50))
            done = rng.randint(0, width)
            percent = 100 * done // width
            bar = fill * done + empty * (width - done)
            count = f"{rng.randint(1, 999)}/999 eta 0:0{rng.randint(0, 9)}"
            return f"{rng.choice(_WORDS)} [{bar}] {percent}% {count}"
        if kind < 0.55:  # spinner frames, as a terminal log keeps them
            frames = rng.choice(_SPINNERS)
            text = rng.choice(_LOG_MESSAGES)
            return "\r".join(f"{frames[i % len(frames)]} {text}" for i in range(rng.randint(2, 12)))
        if kind < 0.75:  # a run of one symbol
            return rng.choice(_SYMBOLS) * rng.randint(2, 120)
        if kind < 0.9:  # bullets and arrows in a list
            return f"{rng.choice(_SYMBOLS)} {rng.choice(_PROSE)[: rng.randint(10, 60)]}"
        return "".join(rng.choice(_SYMBOLS) for _ in range(rng.randint(3, 40)))

    return _repeat(chars, line, "\n")


def _char_runs(rng: random.Random, chars: int) -> str:
    def line() -> str:
        char = rng.choice(_RUN_CHARS)
        run = char * int(2 ** rng.uniform(0, 11))
        if rng.random() < 0.3:
            return f"{rng.choice(_WORDS)} {run} {rng.choice(_WORDS)}"
        return run

    return _repeat(chars, line, "\n")


def _minified_js(rng: random.Random, chars: int) -> str:
    names = "abcdefghijklmnopqrstuvwxyz"

    def name() -> str:
        return rng.choice(names) + (
            rng.choice(names + "0123456789$_") if rng.random() < 0.4 else ""
        )

    def statement() -> str:  # noqa: PLR0911 - one return a kind of statement
        a, b, c = name(), name(), name()
        kind = rng.randint(0, 7)
        if kind == 0:
            return f"function {a}({b},{c}){{return {b}.{rng.choice(_WORDS)}({c})||null}}"
        if kind == 1:
            items = ",".join(name() for _ in range(rng.randint(1, 6)))
            return f"var {a}={b}?{c}:{rng.randint(0, 999)},{b}=[{items}]"
        if kind == 2:
            return f"for(var {a}=0;{a}<{b}.length;{a}++){{if({b}[{a}]==={c})return {a}}}"
        if kind == 3:
            method, value = rng.choice(_WORDS), rng.choice(_WORDS)
            return f'{a}.prototype.{method}=function({b}){{this.{c}="{value}"}}'
        if kind == 4:
            return f"{a}=({b},{c})=>{{{b}&&{c}({b}.{rng.choice(_WORDS)},{rng.randint(0, 99)})}}"
        if kind == 5:
            return f'throw new Error("{rng.choice(_LOG_MESSAGES)}: "+{a})'
        if kind == 6:
            keys = rng.sample(_WORDS, 3)
            return f"{a}={{{keys[0]}:{b},{keys[1]}:!0,{keys[2]}:void 0}}"
        return f"({a}=window.{rng.choice(_WORDS)}||{{}}).{b}={c}|{rng.randint(1, 255)}"

    body = _repeat(chars, statement, ";")
    return f"!function(e,t){{{body}}}(this,function(){{}});"


def _urls_encoded(rng: random.Random, chars: int) -> str:
    def item() -> str:
        kind = rng.random()
        host = rng.choice(_HOSTS)
        if kind < 0.3:  # percent-encoded search and redirect URLs
            words = " ".join(rng.sample(_WORDS, rng.randint(2, 5)))
            encoded = "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in words + "/?&=")
            query = f"utm_source={rng.choice(_WORDS)}&page={rng.randint(1, 40)}"
            return f"https://{host}/search?q={encoded}&{query}"
        if kind < 0.55:  # ids and hashes in the path
            return (
                f"https://{host}/{rng.choice(_SEGMENTS)}/{rng.randbytes(16).hex()}/"
                f"{'-'.join(rng.randbytes(n).hex() for n in (4, 2, 2, 2, 6))}"
                f"?v={rng.randint(1, 99)}"
            )
        if kind < 0.8:  # deep package paths with dots and dashes
            package = rng.choice(_CRATES)
            return (
                f"/usr/lib/python3.{rng.randint(8, 13)}/site-packages/{package}/"
                f"{'/'.join(rng.sample(_SEGMENTS, rng.randint(1, 4)))}/__init__.py"
                f":{rng.randint(1, 900)}"
            )
        return (
            f"./node_modules/@{rng.choice(_WORDS)}/{rng.choice(_WORDS)}-{rng.choice(_WORDS)}/dist/"
            f"{rng.choice(_WORDS)}.{rng.choice(('min.js', 'esm.js', 'd.ts', 'cjs'))}"
        )

    return _repeat(chars, item, "\n")


_MAKERS: dict[str, Callable[[random.Random, int], str]] = {
    "prose": _prose,
    "code": _code,
    "json_compact": lambda rng, chars: _json(rng, chars, pretty=False),
    "json_pretty": lambda rng, chars: _json(rng, chars, pretty=True),
    "chinese": _script(_CHINESE, ""),
    "japanese": _script(_JAPANESE, ""),
    "korean": _script(_KOREAN, " "),
    "russian": _script(_RUSSIAN, " "),
    "arabic": _script(_ARABIC, " "),
    "hindi": _script(_HINDI, " "),
    "emoji_chat": _emoji_chat,
    "base64": _base64,
    "hex": _hex,
    "numbers_csv": _numbers,
    "logs": _logs,
    "urls_paths": _urls,
    "markdown": _markdown,
    "tree_output": _tree,
    "box_tables": _box_table,
    "cargo_tree": _cargo_tree,
    "hebrew": _script(_HEBREW, " "),
    "greek": _script(_GREEK, " "),
    "math": _math,
    "symbol_runs": _symbol_runs,
    "char_runs": _char_runs,
    "minified_js": _minified_js,
    "urls_encoded": _urls_encoded,
}

CLASSES: tuple[str, ...] = tuple(_MAKERS)

# Characters a text of each class is drawn at, so that most texts hold 200 to 3 000 tokens.
_CHARS = {"chinese": (220, 2500), "japanese": (220, 2500), "korean": (300, 3000)}
_CHARS.update({"hindi": (300, 2500), "emoji_chat": (300, 3000), "hex": (400, 5000)})
_CHARS["char_runs"] = (3000, 20000)  # a run of 64 marks is one token: long texts for 200


def sample(kind: str, seed: int) -> str:
    """Return one text of class ``kind``, the same for the same ``seed``."""
    rng = random.Random(f"{kind}/{seed}")
    low, high = _CHARS.get(kind, (900, 10000))
    chars = int(low * (high / low) ** rng.random())  # log-uniform lengths
    return _MAKERS[kind](rng, chars)


def corpus(seed: int, per_class: int) -> list[tuple[str, str]]:
    """Return ``per_class`` texts of every class, seeded by ``seed``."""
    return [
        (kind, sample(kind, seed * 100_003 + index))
        for kind in CLASSES
        for index in range(per_class)
    ]
